"""Shared fixtures: a real tansu broker (no mocks between us and Kafka), and one local Spark
session for every test that runs the capacity job (starting one takes 5–15 s)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# Before anything imports grpc: PySpark starts its JVM with subprocess(preexec_fn=...), i.e. a
# plain fork, while the in-process gateways of session fixtures keep gRPC threads busy; gRPC's
# fork handlers then ran in the child and it died with SIGSEGV (seen once in the suite, failing
# the capacity test with JAVA_GATEWAY_EXITED). Nothing in the suite forks a gRPC user that
# goes on to use gRPC (shard processes are spawned), so the handlers are not needed.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.testing import BackgroundCluster


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One embedded broker for the whole session; tests use unique topic/group names."""
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with EmbeddedBroker(log_path=log) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path) -> Iterator[EmbeddedBroker]:
    """A broker of the test's own, for tests that stop or restart the upstream."""
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as b:
        yield b


@pytest.fixture(scope="session")
def gateway(broker: EmbeddedBroker) -> Iterator[BackgroundCluster]:
    """The gateway in front of the session broker (group APIs forwarded upstream)."""
    with BackgroundCluster.proxy((broker.host, broker.port)) as gw:
        yield gw


@pytest.fixture(scope="session")
def cluster(broker: EmbeddedBroker) -> Iterator[BackgroundCluster]:
    """The whole local cluster (control plane, 2 shard processes, gateway with the group
    APIs served by our coordinator) in front of the session broker."""
    with BackgroundCluster((broker.host, broker.port)) as c:
        yield c


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    sql = pytest.importorskip("pyspark.sql")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (
        sql.SparkSession.builder.master("local[2]")
        .appName("groupcoord-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()
