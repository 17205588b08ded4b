"""What the suite does when a real part (Java, Maven, Kafka, Docker, Prometheus, stunnel) is
missing: a developer's machine skips the tests that need it with one line saying so; CI
(``CI=true``) fails them instead, so a run never goes green by quietly testing less."""

from __future__ import annotations

import os

import pytest


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def unavailable(reason: str) -> None:
    """Skip (fail under CI) the current test: ``reason`` names the missing part."""
    if on_ci():
        pytest.fail(f"a real part the suite needs is missing under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)
