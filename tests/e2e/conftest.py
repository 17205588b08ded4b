"""The upstream matrix: every end-to-end scenario runs against the embedded tansu broker and
Apache Kafka 4.4; the KIP-848, migration and exactly-once modules also against Kafka 3.9, the
cluster without KIP-848 that groupcoord exists for (``pytestmark = pytest.mark.upstreams(...)``).

The session-scoped ``broker`` and ``cluster`` fixtures are parametrized indirectly, so pytest
starts each upstream (and the coordinator in front of it) once and runs its tests together."""

from __future__ import annotations

import pytest

DEFAULT_UPSTREAMS = ("tansu", "kafka-4.4")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("upstreams")
    names = marker.args if marker else DEFAULT_UPSTREAMS
    metafunc.parametrize("broker", names, indirect=True, scope="session")
