"""request-path: where a request's time goes, hop by hop, for synchronous offset commits and
KIP-848 steady heartbeats through groupcoord, against the same load on Kafka 4.4's own
coordinator in the same run.

The hops are read from groupcoord's own histograms (``/metrics`` of the gateway and of every
shard process, scraped before and after each load; means are exact: sum over count of the
increments):

- **client**: what the application waited (librdkafka's synchronous commit; the raw heartbeat
  clients' round trip);
- **gateway**: from a request frame read by the gateway to its answer written
  (``groupcoord_request_latency_seconds{component="gateway"}``);
- **shard**: from an envelope read by a shard worker to its reply queued
  (``{component="shard"}``);
- inside the shard: **queue** (``groupcoord_event_queue_time_seconds``), **run**
  (``groupcoord_event_processing_time_seconds``, handler and replay) and **state write**
  (``groupcoord_state_write_latency_seconds``, send to acks=all acknowledgement of a batch).

So ``client - gateway`` is the client and the socket, ``gateway - shard`` the gateway's own work
and the gRPC hop both ways, and ``shard - queue - run`` what a request waits after its event ran
(for a write: its batch's acknowledgement). Queue, run and write are per event or per batch,
not per request: they are the shard's, attributed to the load that ran alone.

Beside the hops, each process's CPU over the measured window (utime + stime of every thread,
from /proc: gRPC's and the event loop's C code included, which a Python profiler does not see),
in per cent of one core: the gateway (the ``groupcoord up`` process), the shard supervisors and
workers, Kafka's JVM, and this load generator. Heartbeats are sampled over the last seconds of
the run only (the joins and settling rounds come first); commits over the whole load.

This is the per-hop trace docs/performance.md called for; it names the waits, it does not
remove them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

NAME = "request-path"
DESCRIPTION = (
    "commit and heartbeat time per hop (client, gateway, gRPC, shard queue/run/write) vs Kafka 4.4 in one run"
)

HISTOGRAMS = (
    "groupcoord_request_latency_seconds",
    "groupcoord_event_queue_time_seconds",
    "groupcoord_event_processing_time_seconds",
    "groupcoord_state_write_latency_seconds",
)
# what a commit cost: its state writes' Produce requests and the batches they carried
COUNTERS = (
    "groupcoord_offset_commit",
    "groupcoord_state_produce_requests",
    "groupcoord_state_produce_batches",
)


def scrape(targets: list[str]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every ``_sum`` and ``_count`` sample of HISTOGRAMS and ``_total`` of COUNTERS over ``targets``, labels kept (the
    shard's per-partition and per-worker series are added up by the caller)."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
    for target in targets:
        with urllib.request.urlopen(f"http://{target}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name not in HISTOGRAMS and family.name not in COUNTERS:
                continue
            for sample in family.samples:
                if sample.name.endswith(("_sum", "_count", "_total")):
                    labels = tuple(
                        sorted((k, v) for k, v in sample.labels.items() if k in ("component", "api"))
                    )
                    out[(sample.name, labels)] += sample.value
    return out


def mean_ms(before: dict, after: dict, family: str, **labels: str) -> float | None:
    """Mean of ``family``'s observations between two scrapes whose labels include ``labels``."""

    def total(scraped: dict, suffix: str) -> float:
        want = set(labels.items())
        return sum(v for (name, ls), v in scraped.items() if name == family + suffix and want <= set(ls))

    count = total(after, "_count") - total(before, "_count")
    if count <= 0:
        return None
    return round((total(after, "_sum") - total(before, "_sum")) / count * 1000, 3)


def counter_delta(before: dict, after: dict, family: str) -> float:
    """How much ``family`` (every series summed) grew between two scrapes."""

    def total(scraped: dict) -> float:
        return sum(v for (name, _), v in scraped.items() if name == family)

    return total(after) - total(before)


def cpu_us_per_request(share: dict[str, float], per_s: float, *prefixes: str) -> float | None:
    """CPU per request of the processes whose names start with ``prefixes`` (µs; per cent of
    one core over requests per second)."""
    if per_s <= 0:
        return None
    busy = sum(v for k, v in share.items() if k.startswith(prefixes))
    return round(busy / 100 / per_s * 1e6, 1)


def commit_costs(before: dict, after: dict, client: dict[str, Any], share: dict[str, float]) -> dict[str, Any]:
    """What one commit cost: Produce requests and partitions' batches of state writes
    (``groupcoord_state_produce_*``), and the CPU of the brokers serving them and of ours."""
    commits = counter_delta(before, after, "groupcoord_offset_commit_total")
    requests = counter_delta(before, after, "groupcoord_state_produce_requests_total")
    batches = counter_delta(before, after, "groupcoord_state_produce_batches_total")
    per_s = float(client.get("commits_per_s") or 0)
    return {
        "state_produce_requests_per_commit": round(requests / commits, 3) if commits else None,
        "state_batches_per_produce_request": round(batches / requests, 2) if requests else None,
        "kafka_jvm_cpu_us_per_commit": cpu_us_per_request(share, per_s, "Kafka JVM"),
        "coordinator_cpu_us_per_commit": cpu_us_per_request(share, per_s, "gateway", "shard"),
    }


def hops(before: dict, after: dict, api: str) -> dict[str, Any]:
    gateway = mean_ms(before, after, "groupcoord_request_latency_seconds", component="gateway", api=api)
    shard = mean_ms(before, after, "groupcoord_request_latency_seconds", component="shard", api=api)
    queue = mean_ms(before, after, "groupcoord_event_queue_time_seconds")
    run = mean_ms(before, after, "groupcoord_event_processing_time_seconds")
    write = mean_ms(before, after, "groupcoord_state_write_latency_seconds")
    out: dict[str, Any] = {
        "gateway_mean_ms": gateway,
        "shard_mean_ms": shard,
        "shard_event_queue_mean_ms": queue,
        "shard_event_run_mean_ms": run,
        "state_write_mean_ms": write,
    }
    if gateway is not None and shard is not None:
        out["gateway_minus_shard_ms"] = round(gateway - shard, 3)
    if shard is not None and queue is not None and run is not None:
        out["shard_after_run_ms"] = round(shard - queue - run, 3)
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """Per-process CPU seconds, sampled every second in a thread while a load runs; ``share``
    is the per cent of one core each used between two samples."""

    def __init__(self, processes: dict[int, str]) -> None:
        self.processes = processes
        self.samples: list[tuple[float, dict[int, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic(), {pid: _cpu_seconds(pid) for pid in self.processes}))
            if self._stop.wait(1.0):
                return

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.samples.append((time.monotonic(), {pid: _cpu_seconds(pid) for pid in self.processes}))

    def share(self, last_s: float | None = None) -> dict[str, float]:
        """Per cent of one core per process over the last ``last_s`` seconds (all, if None)."""
        end_t, end = self.samples[-1]
        start_t, start = next((t, c) for t, c in self.samples if last_s is None or t >= end_t - last_s)
        span = max(end_t - start_t, 1e-9)
        out = {
            f"{name} ({pid})": round((end[pid] - start[pid]) / span * 100, 1)
            for pid, name in self.processes.items()
        }
        out["total"] = round(sum(out.values()), 1)
        return out


def processes_of(up_pid: int, kafka_pids: list[int], upstream: str = "Kafka JVM") -> dict[int, str]:
    """``groupcoord up`` and every process under it (shard supervisors, workers), the upstream
    (``upstream`` names it), us."""
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid_s, rest = stat.read_text().split(" ", 1)
            children[int(rest.rsplit(")", 1)[1].split()[1])].append(int(pid_s))
        except (OSError, ValueError, IndexError):
            continue
    found = {up_pid: "gateway (groupcoord up)"}
    todo = [(pid, up_pid) for pid in children[up_pid]]
    while todo:
        pid, parent = todo.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if " shard " in f"{cmdline} ":
            found[pid] = "shard supervisor"
        elif parent == up_pid:  # --gateway-processes (and multiprocessing's resource tracker)
            found[pid] = "gateway resource tracker" if "resource_tracker" in cmdline else "gateway process"
        else:
            found[pid] = "shard worker"
        todo += [(child, pid) for child in children[pid]]
    for pid in kafka_pids:
        found[pid] = upstream
    found[os.getpid()] = "load generator"
    return found


def targets_of(port: int) -> list[str]:
    from groupcoord.local_cluster import state_file  # noqa: PLC0415

    state = json.loads(state_file(port).read_text())
    shards = [f"{s['host']}:{s['metrics_port']}" for s in state["shards"].values() if s.get("metrics_port")]
    return [state["gateway_metrics"], *shards]


def run(args: list[str]) -> dict[str, object]:
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from e2e_heartbeat import scenario as heartbeat_scenario  # noqa: PLC0415
    from kafka_side_by_side import KAFKA_OFFSETS_PARTITIONS, commits, warm_up  # noqa: PLC0415

    from groupcoord.embedded_broker import free_port  # noqa: PLC0415
    from groupcoord_testing.apache_kafka import VERSIONS, ApacheKafka  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--kafka-version", default=VERSIONS["kafka-4.4"])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--committers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8, help="seconds of each load")
    parser.add_argument("--hb-groups", type=int, default=100)
    parser.add_argument("--hb-members", type=int, default=1000)
    parser.add_argument("--hb-window", type=int, default=64)
    parser.add_argument("--hb-connections", type=int, default=4)
    opts = parser.parse_args(args)

    load_before = os.getloadavg()
    begun = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="request-path-") as tmp:
        kafka = ApacheKafka(Path(tmp), version=opts.kafka_version)
        port = free_port()
        with kafka, UpProcess(kafka.bootstrap, port, opts.shards, opts.threads) as up:
            topic, hb_topic = f"rp-commit-{uuid.uuid4().hex[:6]}", f"rp-hb-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
            for fut in admin.create_topics([NewTopic(topic, 8, 1), NewTopic(hb_topic, 12, 1)]).values():
                fut.result(30)
            time.sleep(4)  # the shards' topic metadata refresh sees the topics
            warm_up(kafka.bootstrap, topic, KAFKA_OFFSETS_PARTITIONS)
            warm_up(up.bootstrap, topic, 1)
            targets = targets_of(port)

            assert up.proc is not None
            processes = processes_of(up.proc.pid, [n.process.pid for n in kafka.members if n.process])
            result: dict[str, Any] = {}
            with CpuSampler(processes) as kafka_cpu:
                kafka_commits = commits(kafka.bootstrap, topic, opts.committers, opts.seconds)
            before = scrape(targets)
            with CpuSampler(processes) as our_cpu:
                our_commits = commits(up.bootstrap, topic, opts.committers, opts.seconds)
            after = scrape(targets)
            result["offset_commit"] = {
                "kafka_client": kafka_commits,
                "kafka_cpu_percent_of_a_core": kafka_cpu.share(),
                "groupcoord_client": our_commits,
                "groupcoord_hops": hops(before, after, "offset_commit"),
                "groupcoord_cpu_percent_of_a_core": our_cpu.share(),
                "kafka_per_commit": {
                    "kafka_jvm_cpu_us_per_commit": cpu_us_per_request(
                        kafka_cpu.share(), float(kafka_commits.get("commits_per_s") or 0), "Kafka JVM"
                    )
                },
                "groupcoord_per_commit": commit_costs(before, after, our_commits, our_cpu.share()),
            }

            def heartbeats(bootstrap: str) -> dict[str, Any]:
                figures = asyncio.run(
                    heartbeat_scenario(
                        bootstrap,
                        hb_topic,
                        opts.hb_groups,
                        opts.hb_members,
                        opts.seconds,
                        opts.hb_window,
                        opts.hb_connections,
                        settle_s=1.5,
                    )
                )
                figures.pop("target", None)
                return figures

            steady = max(opts.seconds - 2, 1)  # the end of the measured window, after the joins
            with CpuSampler(processes) as kafka_cpu:
                kafka_hb = heartbeats(kafka.bootstrap)
            before = scrape(targets)
            with CpuSampler(processes) as our_cpu:
                our_hb = heartbeats(up.bootstrap)
            after = scrape(targets)
            result["consumer_group_heartbeat"] = {
                "kafka_client": kafka_hb,
                "kafka_cpu_percent_of_a_core": kafka_cpu.share(steady),
                "groupcoord_client": our_hb,
                # includes the joins and the settling rounds before the steady window
                "groupcoord_hops": hops(before, after, "consumer_group_heartbeat"),
                "groupcoord_cpu_percent_of_a_core": our_cpu.share(steady),
            }
    return {
        "kafka_version": opts.kafka_version,
        "groupcoord": {"shards": opts.shards, "threads_per_shard": opts.threads},
        "cpus": os.cpu_count(),
        **result,
        "seconds": round(time.monotonic() - begun, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
