"""One ``/metrics`` port per shard process (or gateway): the first process serves every
process's series.

A shard process runs ``--threads`` worker processes, each with its own Prometheus registry.
A pod exposes one metrics port, so the supervisor serves ``--metrics-port`` and, on each
scrape, reads every worker's exposition from a loopback-only endpoint (an ephemeral port the
worker reports over a pipe when it starts), adds a ``worker`` label to each sample and merges
the families.

Why the supervisor aggregates instead of prometheus-client's multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR`` + ``MultiProcessCollector``): multiprocess mode only sees the
four standard metric types written to its mmap files. The workers' custom collectors —
consumer lag (:mod:`.consumer_lag`) and the windowed load-time / idle-ratio gauges
(:mod:`.windows`) — compute their samples at scrape time in the worker and would vanish; every
gauge would need a ``multiprocess_mode`` picked per family, ``_created`` samples and the
per-process ``process_*`` series are lost, and the files of dead workers must be cleaned up by
hand. Aggregating the workers' own expositions keeps each series exactly as the worker
computed it, per worker, and costs one loopback HTTP request per worker per scrape.

``groupcoord_shard_worker_up{shard,worker}`` says whether a worker's exposition was read in
this scrape (0: the worker did not answer within the timeout; its series are absent).

A gateway of several processes (``groupcoord up --gateway-processes``) is served the same way:
:class:`ProcessExpositions` labels the other processes' series ``gateway_process``.
"""

from __future__ import annotations

import logging
import threading
import urllib.request
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

WORKER_LABEL = "worker"


def merge_expositions(expositions: Iterable[tuple[str, str]], label: str = WORKER_LABEL) -> list[Metric]:
    """The families of several text expositions, each sample labelled ``label=<key>``.

    Families of the same name are merged (the first exposition's help and type win)."""
    merged: dict[str, Metric] = {}
    for worker, text in expositions:
        for family in text_string_to_metric_families(text):
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
            for s in family.samples:
                into.add_sample(s.name, {**s.labels, label: worker}, s.value, s.timestamp, s.exemplar)
    return list(merged.values())


class ProcessExpositions(Collector):
    """Collects other processes' expositions from their loopback ``/metrics`` ports (register
    in the serving process's registry), with a gauge ``up_name`` saying which were read."""

    def __init__(
        self,
        label: str,
        up_name: str,
        up_help: str,
        const_labels: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        timeout_s: float = 5.0,
    ) -> None:
        self.label = label
        self.up_name = up_name
        self.up_help = up_help
        self.const_labels = dict(const_labels or {})
        self.host = host
        self.timeout_s = timeout_s
        self._ports: dict[int, int] = {}
        self._lock = threading.Lock()

    def set_port(self, process: int, port: int) -> None:
        with self._lock:
            self._ports[process] = port

    def processes(self) -> list[int]:
        """Every process whose series belong here (those whose ports are known)."""
        with self._lock:
            return sorted(self._ports)

    def _read(self, process: int) -> str | None:
        port = self._ports.get(process)
        if port is None:
            return None
        try:
            with urllib.request.urlopen(f"http://{self.host}:{port}/metrics", timeout=self.timeout_s) as r:
                return r.read().decode()
        except OSError as exc:
            log.warning("%s %d's metrics on port %d: %s", self.label, process, port, exc)
            return None

    def collect(self) -> Iterator[Metric]:
        processes = self.processes()
        with ThreadPoolExecutor(max_workers=max(1, len(processes))) as pool:
            texts = dict(zip(processes, pool.map(self._read, processes), strict=True))
        up = GaugeMetricFamily(self.up_name, self.up_help, labels=[*self.const_labels, self.label])
        for process in processes:
            up.add_metric([*self.const_labels.values(), str(process)], 0.0 if texts[process] is None else 1.0)
        yield from merge_expositions(((str(w), t) for w, t in texts.items() if t is not None), self.label)
        yield up


class WorkerExpositions(ProcessExpositions):
    """A shard's workers' expositions (register in the supervisor's registry).

    ``reports[i]`` is the receiving end of the pipe over which worker ``i`` sends the port of
    its loopback ``/metrics`` endpoint once it serves it."""

    def __init__(
        self, shard_id: str, reports: dict[int, Connection], host: str = "127.0.0.1", timeout_s: float = 5.0
    ) -> None:
        super().__init__(
            WORKER_LABEL,
            "groupcoord_shard_worker_up",
            "Whether the worker process's metrics were read in this scrape (1) or not (0).",
            {"shard": shard_id},
            host,
            timeout_s,
        )
        self.shard_id = shard_id
        self._reports = dict(reports)

    def processes(self) -> list[int]:
        self._learn_ports()
        return sorted(set(super().processes()) | set(self._reports))

    def _learn_ports(self) -> None:
        with self._lock:
            for worker, conn in list(self._reports.items()):
                try:
                    if conn.poll():
                        self._ports[worker] = int(conn.recv())
                        del self._reports[worker]
                        conn.close()
                except (EOFError, OSError):  # the worker died before it served metrics
                    del self._reports[worker]
