"""The supervisor's one metrics port: every worker's exposition, labelled by worker.

Real HTTP endpoints stand in for the workers' loopback ``/metrics`` (the same
``serve_metrics`` the workers run), and their ports arrive over real pipes, as from worker
processes; the supervisor's endpoint is scraped over HTTP. (A shard process with two workers is
scraped end to end in tests/coordinator/runtime/test_shard_command.py.)"""

from __future__ import annotations

import multiprocessing
import urllib.request

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.parser import text_string_to_metric_families

from groupcoord.observability.consumer_lag import ConsumerLagCollector
from groupcoord.observability.metrics_endpoint import serve_metrics
from groupcoord.observability.worker_metrics import WorkerExpositions


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_supervisor_serves_every_worker_labelled_and_says_which_answered() -> None:
    servers, reports = [], {}
    for worker in range(3):
        registry = CollectorRegistry()
        Gauge("demo_partitions", "p", ["shard"], registry=registry).labels("4").set(worker + 1)
        Counter("demo_commits", "c", ["shard"], registry=registry).labels("4").inc(10 * worker)
        lag = ConsumerLagCollector("4")  # a custom collector: multiprocess mode would drop it
        registry.register(lag)
        lag.update({"g": {"t": {0: 5}}}, {("t", 0): 5 + worker})
        receive, send = multiprocessing.Pipe(duplex=False)
        reports[worker] = receive
        if worker < 2:
            server, _ = serve_metrics(0, registry, addr="127.0.0.1")
            servers.append(server)
            send.send(server.server_port)
        send.close()  # worker 2 died before it served metrics: EOF, no port
    supervisor_registry = CollectorRegistry()
    supervisor_registry.register(WorkerExpositions("4", reports))
    supervisor, _ = serve_metrics(0, supervisor_registry, addr="127.0.0.1")
    try:
        got = scrape(supervisor.server_port)
        for w in (0, 1):
            labels = frozenset({"shard": "4", "worker": str(w)}.items())
            assert got[("demo_partitions", labels)] == w + 1
            assert got[("demo_commits_total", labels)] == 10 * w
            lag_labels = frozenset({"shard": "4", "group": "g", "topic": "t", "worker": str(w)}.items())
            assert got[("groupcoord_consumer_group_lag", lag_labels)] == w
            assert got[("groupcoord_shard_worker_up", labels)] == 1.0
        assert not any(dict(k[1]).get("worker") == "2" for k in got)

        servers[1].shutdown()  # worker 1 stops answering: its series go, up says 0
        servers[1].server_close()
        got = scrape(supervisor.server_port)
        assert got[("groupcoord_shard_worker_up", frozenset({"shard": "4", "worker": "1"}.items()))] == 0.0
        assert ("demo_partitions", frozenset({"shard": "4", "worker": "1"}.items())) not in got
        assert got[("demo_partitions", frozenset({"shard": "4", "worker": "0"}.items()))] == 1.0
    finally:
        supervisor.shutdown()
        servers[0].shutdown()
