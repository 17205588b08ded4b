"""What the suite does when a real part (Java, Maven, Kafka, Docker, Prometheus, stunnel) is
missing: a developer's machine skips the tests that need it with one line saying so; CI
(``CI=true``) fails them instead, so a run never goes green by quietly testing less."""

from __future__ import annotations

import os
from typing import Any

import pytest

from groupcoord_testing.apache_kafka import VERSIONS, ApacheKafka, KafkaUnavailable


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


def start_apache_kafka(name: str, workdir: Any, **options: Any) -> ApacheKafka:
    """Apache Kafka ``name`` (``kafka-4.4``, ``kafka-3.9``) started in ``workdir``, or the test
    skipped (failed under CI) when Java or the jars ``scripts/test`` resolves are missing."""
    try:
        return ApacheKafka(workdir, version=VERSIONS[name], **options).start()
    except KafkaUnavailable as exc:
        unavailable(str(exc))
        raise
