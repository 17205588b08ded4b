"""Shared fixtures: a real upstream (no mocks between us and Kafka) — the embedded tansu broker
by default, Apache Kafka 4.4 or 3.9 where a test is parametrized over the upstream matrix
(``tests/e2e``) — and one local Spark session for every test that runs the capacity job
(starting one takes 5–15 s)."""

from __future__ import annotations

import os
import sys
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

# Before anything imports grpc: PySpark starts its JVM with subprocess(preexec_fn=...), i.e. a
# plain fork, while the in-process gateways of session fixtures keep gRPC threads busy; gRPC's
# fork handlers then ran in the child and it died with SIGSEGV (seen once in the suite, failing
# the capacity test with JAVA_GATEWAY_EXITED). Nothing in the suite forks a gRPC user that
# goes on to use gRPC (shard processes are spawned), so the handlers are not needed.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from real_parts import require_binary, start_apache_kafka

from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord_testing import BackgroundCluster, cluster_options
from groupcoord_testing.apache_kafka import ApacheKafka

Upstream = EmbeddedBroker | ApacheKafka

# The suite runs on two pytest-xdist workers (scripts/test, ``--dist loadgroup``). A module's
# tests stay together on one worker, in order, with its module fixtures once; these directories
# go to one worker each as a whole: the container tests share one Docker Engine (their fixture
# starts it), and the Spark tests one local Spark session (a JVM; 5-15 s to start).
_ONE_WORKER = {"deploy": "containers", "spark": "spark"}


def xdist_group_of(item: pytest.Item) -> str:
    """The xdist group of a test: its module, or its directory's of ``_ONE_WORKER``."""
    path = os.path.relpath(str(item.path), os.path.dirname(__file__))
    top = path.split(os.sep, 1)[0]
    return _ONE_WORKER.get(top, path.replace(os.sep, "/"))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the marks (its hook is later)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))


_group_seconds: Counter[str] = Counter()
_worker_seconds: Counter[str] = Counter()
_group_workers: defaultdict[str, set[str]] = defaultdict(set)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sums each group's and each worker's time (setup, call and teardown), for the summary."""
    node = getattr(report, "node", None)  # the worker that ran it; set in the xdist controller
    if node is None:
        return
    path = report.nodeid.split("::", 1)[0].removeprefix("tests/")
    top = path.split("/", 1)[0]
    group = _ONE_WORKER.get(top, path)
    _group_seconds[group] += report.duration
    _worker_seconds[node.gateway.id] += report.duration
    _group_workers[group].add(node.gateway.id)


def _split_groups() -> dict[str, set[str]]:
    return {group: workers for group, workers in _group_workers.items() if len(workers) > 1}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A group that ran on two workers fails the run: its module fixtures (brokers, clusters)
    were started twice and its ordered tests raced (pytest-xdist's grouping once stopped
    working without a word when pytest changed how node ids are kept)."""
    grouped = session.config.getoption("dist", "no") == "loadgroup"
    if grouped and _split_groups() and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the workers' time went, for whoever balances the suite next."""
    if not _worker_seconds:
        return
    workers = ", ".join(f"{w} {s / 60:.1f} min" for w, s in sorted(_worker_seconds.items()))
    terminalreporter.write_line(f"time in tests per worker: {workers}")
    longest = ", ".join(f"{g} {s:.0f} s" for g, s in _group_seconds.most_common(12))
    terminalreporter.write_line(f"longest groups: {longest}")
    if terminalreporter.config.getoption("dist", "no") != "loadgroup":
        return  # without --dist loadgroup nothing keeps a group on one worker
    for group, workers in sorted(_split_groups().items()):
        terminalreporter.write_line(f"error: group {group} ran on {', '.join(sorted(workers))}", red=True)


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """One upstream for the whole session (per upstream of the matrix); tests use unique
    topic/group names. Unparametrized it is the embedded tansu broker."""
    name = getattr(request, "param", "tansu")
    if name == "tansu":
        log = tmp_path_factory.mktemp("tansu") / "tansu.log"
        with EmbeddedBroker(log_path=log) as b:
            yield b
        return
    kafka = start_apache_kafka(name, tmp_path_factory.mktemp(name))
    try:
        yield kafka
    finally:
        kafka.stop()


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
    APIs served by our coordinator) in front of the session broker, on the state topic
    ``groupcoord up`` uses (tests/e2e/test_internal_topics.py checks it is internal): the one
    cluster of a broker on it, every other cluster has a state topic of its own."""
    with BackgroundCluster((broker.host, broker.port), cluster_options(state_topic=DEFAULT_STATE_TOPIC)) as c:
        yield c


@pytest.fixture(scope="session")
def prometheus_installed() -> str:
    """Prometheus itself (Debian's package): the observability tests scrape us with it."""
    return require_binary("prometheus", "prometheus")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark import sql  # noqa: PLC0415 - the test extra installs it; starting the JVM is the slow part
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


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real Kubernetes API server for the session (``tests/operator/kube_apiserver.py``);
    tests take a namespace of their own with :func:`workload_namespace`."""
    from tests.operator.kube_apiserver import KubeApiServer  # noqa: PLC0415

    with KubeApiServer(tmp_path_factory.mktemp("kube-apiserver")) as server:
        yield server


_workload_namespaces = iter(range(1, 10_000))


@pytest.fixture
async def workload_namespace(kube_apiserver: Any, tmp_path: Any) -> AsyncIterator[Any]:
    """A namespace of its own on the session's API server, with the chart installed and a
    kubeconfig of the chart's workload account (what shard and gateway pods run as)."""
    from tests.operator.kube_apiserver import workload_namespace as make  # noqa: PLC0415

    async with kube_apiserver.admin_session() as admin:
        yield await make(kube_apiserver, admin, f"workload-{next(_workload_namespaces)}", tmp_path)
