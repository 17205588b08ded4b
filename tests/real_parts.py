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


def require_binary(name: str, package: str) -> str:
    """The path of ``name`` on PATH, or the test skipped (failed under CI): ``scripts/test``
    installs Debian's ``package`` for it."""
    import shutil  # noqa: PLC0415

    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} is not installed (Debian package {package}; scripts/test installs it)")
    assert found is not None
    return found
