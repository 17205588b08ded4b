"""kafka-side-by-side: the same load, in one run, against Apache Kafka 4.4's own group
coordinator and against groupcoord in front of the same Kafka 4.4: the yardstick every
performance goal is measured against.

One Kafka 4.4 node (KRaft, from the jars ``scripts/test`` resolves) serves both: its own
coordinator is reached at its bootstrap address, groupcoord (``groupcoord up --kafka``, in
processes of its own as deployed, so the load generator shares no interpreter with it) at the
gateway. Each scenario runs against Kafka first, then against groupcoord, on fresh groups:

1. KIP-848 steady heartbeats: raw ConsumerGroupHeartbeat v1 clients (e2e-heartbeat's load):
   members, heartbeats/s, p50/p99.
2. Rebalance: how long until a KIP-848 group of N members is stable after one member joins and
   after one leaves (raw heartbeat clients, round after round; stable = a round that changes
   nothing with every partition owned by exactly one member at one epoch): "concurrent", each
   round's heartbeats all in flight over several connections, as a real group's members
   heartbeat, and "sequential", one after another on one connection, which makes the time
   mostly one request's latency times the members; and the same for
   librdkafka classic ``cooperative-sticky`` members (stable = every partition owned exactly
   once, balanced within one, as the members' own rebalance callbacks report).
3. Offset commits from librdkafka: synchronous commits back to back from several consumers,
   commits/s and p50/p99.
4. Produce and fetch through the gateway against direct (gateway-proxy's measurements).

Ratios are groupcoord / Kafka (``*_per_s``: higher is better; ``*_ms``: lower is better). The
machine's load average is taken before and after: figures from a busy machine are not figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "kafka-side-by-side"
DESCRIPTION = "KIP-848 heartbeats, rebalances, commits, produce/fetch: Kafka 4.4's coordinator vs groupcoord in front of it"

TARGETS = ("kafka", "groupcoord")
KAFKA_OFFSETS_PARTITIONS = 10  # offsets.topic.num.partitions of groupcoord_testing.apache_kafka
KAFKA_ASSIGNMENT_INTERVAL_S = 1.0  # Kafka 4.4's default group.consumer.assignment.interval.ms


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _sizes(value: str) -> list[int]:
    return [int(v) for v in value.split(",") if v.strip()]


def ratios(kafka: dict[str, Any], ours: dict[str, Any]) -> dict[str, float | None]:
    """groupcoord / Kafka for every numeric figure both have (``*_per_s`` higher is better,
    ``*_ms`` lower is better)."""
    out: dict[str, float | None] = {}
    for key, theirs in kafka.items():
        mine = ours.get(key)
        if key.endswith(("_per_s", "_ms")) and isinstance(theirs, int | float) and isinstance(mine, int | float):
            out[key] = round(mine / theirs, 3) if theirs else None
    return out


def side_by_side(measure: Callable[[str, str], dict[str, Any]], bootstraps: dict[str, str]) -> dict[str, Any]:
    """``measure(target, bootstrap)`` against each target, Kafka first, and the ratios."""
    result: dict[str, Any] = {target: measure(target, bootstraps[target]) for target in TARGETS}
    result["ratios"] = ratios(result["kafka"], result["groupcoord"])
    return result


def java_hash_partition(group: str, partitions: int) -> int:
    """Kafka's ``GroupCoordinatorService.partitionFor``: ``Utils.abs(groupId.hashCode()) % n``."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def warm_up(bootstrap: str, topic: str, coordinator_partitions: int) -> None:
    """A committed offset in a group of every coordinator partition, retried until it is
    acknowledged: the raw heartbeat clients find no coordinator themselves, and Kafka creates
    ``__consumer_offsets`` and loads its partitions on the first FindCoordinator."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: PLC0415

    groups: dict[int, str] = {}
    i = 0
    while len(groups) < coordinator_partitions:
        groups.setdefault(java_hash_partition(f"sbs-warm-{i}", coordinator_partitions), f"sbs-warm-{i}")
        i += 1
    deadline = time.monotonic() + 120
    for group in groups.values():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            while True:
                try:
                    (tp,) = consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
                    if tp.error is None:
                        break
                except KafkaException:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no coordinator answered at {bootstrap}")
                time.sleep(0.2)
        finally:
            consumer.close()


# -- 2. rebalances -------------------------------------------------------------------------


async def kip848_rebalance(
    bootstrap: str, topic: str, partitions: int, members: int, connections: int
) -> dict[str, Any]:
    """Form a group of ``members``; time until it is stable after one joins, then after one
    leaves. With ``connections`` > 0 every round's heartbeats are in flight at once, spread
    over that many connections, as the members of a real group heartbeat each on its own
    clock; with 0 they go one after another on one connection, so a round takes
    ``members`` round trips and the time is mostly one request's latency."""
    from _kip848_members import Connection, Member  # noqa: PLC0415

    host, port = bootstrap.rsplit(":", 1)
    conns = [await Connection(host, int(port)).open() for _ in range(max(connections, 1))]
    conn = conns[0]

    async def round_of(group: list[Any]) -> bool:
        if not connections:
            return await conn.in_turn(group)
        shares = [group[i :: len(conns)] for i in range(len(conns))]
        changed = await asyncio.gather(*(c.heartbeats(ms) for c, ms in zip(conns, shares, strict=True) if ms))
        return any(changed)

    def stable(group: list[Any], above: int) -> bool:
        """Every partition owned by exactly one member, every member at one epoch, and that
        epoch past ``above``: a join or a leave bumps the group epoch, so members still at the
        old one have not been given the new target assignment yet."""
        owned = [p for m in group for ps in m.owned.values() for p in ps]
        epochs = {m.epoch for m in group}
        return len(owned) == len(set(owned)) == partitions and len(epochs) == 1 and epochs.pop() > above

    async def settle(group: list[Any], above: int, timeout_s: float = 120) -> int:
        """Heartbeat rounds until stable. Kafka 4.4 updates a group's target assignment at
        most every ``group.consumer.assignment.interval.ms`` (1 s by default), off the
        heartbeat path, so rounds may change nothing before it does: go on until the deadline."""
        deadline = time.perf_counter() + timeout_s
        rounds = 0
        while time.perf_counter() < deadline:
            rounds += 1
            if not await round_of(group):
                if stable(group, above):
                    return rounds
                await asyncio.sleep(0.005)
        raise RuntimeError(
            f"a {len(group)}-member group did not become stable at {bootstrap}: "
            f"{[(m.epoch, {str(t)[:8]: sorted(ps) for t, ps in m.owned.items()}) for m in group]}"
        )

    group_id = f"sbs-848-{uuid.uuid4().hex[:8]}"
    group = [Member(group_id) for _ in range(members)]
    try:
        for m in group:
            await conn.heartbeat(m, topic, joining=True)
        await settle(group, 0)
        start = time.perf_counter()
        newcomer = Member(group_id)
        await conn.heartbeat(newcomer, topic, joining=True)
        group.append(newcomer)
        join_rounds = await settle(group, group[0].epoch)
        joined = time.perf_counter() - start
        leaver = group.pop(0)
        start = time.perf_counter()
        leaver.epoch = -1  # LeaveGroup of KIP-848: a heartbeat at member epoch -1
        await conn.heartbeat(leaver)
        leave_rounds = await settle(group, group[0].epoch)
        left = time.perf_counter() - start
        for m in group:  # leave, so the group's members do not linger until their session ends
            m.epoch = -1
            await conn.heartbeat(m)
    finally:
        for c in conns:
            c.close()
    return {
        "stable_after_join_ms": round(joined * 1000, 1),
        "join_heartbeat_rounds": join_rounds,
        "stable_after_leave_ms": round(left * 1000, 1),
        "leave_heartbeat_rounds": leave_rounds,
    }


class ClassicMember(threading.Thread):
    """A librdkafka classic member with ``cooperative-sticky``, polled in a thread of its own;
    ``owned`` follows its rebalance callbacks (incremental in the cooperative protocol)."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer  # noqa: PLC0415

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "enable.auto.commit": False,
                "session.timeout.ms": 30000,
                "heartbeat.interval.ms": 500,
            }
        )
        self.topic = topic
        self.owned: frozenset[int] = frozenset()
        self.stop = threading.Event()

    def run(self) -> None:
        def gained(_c: Any, tps: list[Any]) -> None:
            self.owned = self.owned | {tp.partition for tp in tps}

        def lost(_c: Any, tps: list[Any]) -> None:
            self.owned = self.owned - {tp.partition for tp in tps}

        self.consumer.subscribe([self.topic], on_assign=gained, on_revoke=lost, on_lost=lost)
        while not self.stop.is_set():
            self.consumer.poll(0.02)
        self.consumer.close()  # leaves the group


def classic_rebalance(bootstrap: str, topic: str, partitions: int, members: int, timeout_s: float) -> dict[str, Any]:
    group_id = f"sbs-classic-{uuid.uuid4().hex[:8]}"

    def stable(group: list[ClassicMember]) -> bool:
        counts = [len(m.owned) for m in group]
        owned = {p for m in group for p in m.owned}
        return sum(counts) == len(owned) == partitions and max(counts) - min(counts) <= 1

    def wait_stable(group: list[ClassicMember]) -> float:
        start = time.perf_counter()
        while not stable(group):
            if time.perf_counter() - start > timeout_s:
                raise RuntimeError(f"a classic group of {len(group)} members did not become stable")
            time.sleep(0.005)
        return time.perf_counter() - start

    group = [ClassicMember(bootstrap, topic, group_id) for _ in range(members)]
    try:
        for m in group:
            m.start()
        wait_stable(group)
        newcomer = ClassicMember(bootstrap, topic, group_id)
        newcomer.start()
        group.append(newcomer)
        joined = wait_stable(group)
        leaver = group.pop(0)
        leaver.stop.set()  # its thread closes the consumer, which leaves the group
        left = wait_stable(group)
        leaver.join(60)
    finally:
        for m in group:
            m.stop.set()
        for m in group:
            m.join(60)
    return {"stable_after_join_ms": round(joined * 1000, 1), "stable_after_leave_ms": round(left * 1000, 1)}


# -- 3. offset commits ---------------------------------------------------------------------


def commits(bootstrap: str, topic: str, committers: int, seconds: float) -> dict[str, Any]:
    """``committers`` librdkafka consumers (groups of their own, no subscription) committing
    synchronously back to back for ``seconds`` after a warm-up commit each."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    latencies: list[list[float]] = [[] for _ in range(committers)]
    errors: list[str] = []
    barrier = threading.Barrier(committers + 1)

    def commit_loop(i: int) -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"sbs-commit-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
        )
        offset = 1
        try:
            consumer.commit(offsets=[TopicPartition(topic, i % 8, offset)], asynchronous=False)  # warm-up
            barrier.wait(60)
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                offset += 1
                sent = time.perf_counter()
                (tp,) = consumer.commit(offsets=[TopicPartition(topic, i % 8, offset)], asynchronous=False)
                if tp.error is not None:
                    errors.append(str(tp.error))
                    continue
                latencies[i].append((time.perf_counter() - sent) * 1000)
        except Exception as exc:  # noqa: BLE001 - an application error is a result here
            errors.append(repr(exc))
        finally:
            consumer.close()

    threads = [threading.Thread(target=commit_loop, args=(i,), daemon=True) for i in range(committers)]
    for t in threads:
        t.start()
    barrier.wait(120)
    for t in threads:
        t.join(seconds + 60)
    samples = [x for per in latencies for x in per]
    return {
        "committers": committers,
        "commits": len(samples),
        "commits_per_s": round(len(samples) / seconds, 1),
        "p50_ms": round(statistics.median(samples), 3) if samples else None,
        "p99_ms": round(_pct(samples, 0.99), 3),
        "errors": errors[:5],
    }


# -- the run -------------------------------------------------------------------------------


def run(args: list[str]) -> dict[str, object]:
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from e2e_heartbeat import scenario as heartbeat_scenario  # noqa: PLC0415
    from gateway_proxy import measure as produce_fetch  # noqa: PLC0415

    from groupcoord.embedded_broker import free_port  # noqa: PLC0415
    from groupcoord_testing.apache_kafka import VERSIONS, ApacheKafka  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--kafka-version", default=VERSIONS["kafka-4.4"])
    parser.add_argument("--kafka-heap-mb", type=int, default=1024)
    parser.add_argument(
        "--kafka-assignment-interval-ms",
        type=int,
        default=None,
        help="Kafka's group.consumer.assignment.interval.ms (default: Kafka's own, 1000 in 4.4): "
        "how often its coordinator may update a KIP-848 group's target assignment",
    )
    parser.add_argument("--shards", type=int, default=2, help="groupcoord shard processes")
    parser.add_argument("--threads", type=int, default=1, help="worker processes per shard")
    parser.add_argument(
        "--gateway-processes", type=int, default=1, help="groupcoord gateway processes (SO_REUSEPORT)"
    )
    parser.add_argument("--hb-groups", type=int, default=100, help="heartbeating KIP-848 groups")
    parser.add_argument("--hb-members", type=int, default=1000, help="heartbeating KIP-848 members")
    parser.add_argument("--hb-seconds", type=float, default=10)
    parser.add_argument("--hb-window", type=int, default=64, help="heartbeats in flight per connection")
    parser.add_argument("--hb-connections", type=int, default=4)
    parser.add_argument("--kip848-sizes", type=_sizes, default=[10, 100, 1000], help="KIP-848 group sizes")
    parser.add_argument("--classic-sizes", type=_sizes, default=[10, 100], help="classic cooperative group sizes")
    parser.add_argument(
        "--rebalance-connections",
        type=int,
        default=8,
        help="KIP-848 rebalances: connections a round's heartbeats are spread over, all in flight "
        "at once (the 'concurrent' figures; 'sequential' sends them one after another)",
    )
    parser.add_argument("--rebalance-partitions", type=int, default=200, help="partitions of the subscribed topic")
    parser.add_argument("--classic-timeout", type=float, default=120, help="seconds a classic group may take")
    parser.add_argument("--committers", type=int, default=8)
    parser.add_argument("--commit-seconds", type=float, default=8)
    parser.add_argument("--records", type=int, default=50_000, help="records produced and fetched")
    parser.add_argument("--size", type=int, default=100, help="record bytes")
    parser.add_argument("--rounds", type=int, default=300, help="single produce/fetch round trips")
    opts = parser.parse_args(args)
    if opts.classic_sizes and opts.rebalance_partitions <= max(opts.classic_sizes) + 1:
        # a classic group is stable when balanced: with no more partitions than members, a
        # newcomer without any would already look balanced
        parser.error("--rebalance-partitions must exceed the largest classic group plus one")

    load_before = os.getloadavg()
    begun = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafka-side-by-side-") as tmp:
        overrides = (
            {}
            if opts.kafka_assignment_interval_ms is None
            else {"group.consumer.assignment.interval.ms": opts.kafka_assignment_interval_ms}
        )
        kafka = ApacheKafka(Path(tmp), version=opts.kafka_version, heap_mb=opts.kafka_heap_mb, overrides=overrides)
        with kafka, UpProcess(
            kafka.bootstrap,
            free_port(),
            opts.shards,
            opts.threads,
            extra=["--gateway-processes", str(opts.gateway_processes)],
        ) as up:
            bootstraps = {"kafka": kafka.bootstrap, "groupcoord": up.bootstrap}
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
            topics = {
                "hb": (f"sbs-hb-{uuid.uuid4().hex[:6]}", 12),
                "rebalance": (f"sbs-rb-{uuid.uuid4().hex[:6]}", opts.rebalance_partitions),
                "commit": (f"sbs-commit-{uuid.uuid4().hex[:6]}", 8),
                **{f"pf-{t}": (f"sbs-pf-{t}-{uuid.uuid4().hex[:6]}", 1) for t in TARGETS},
            }
            for fut in admin.create_topics([NewTopic(n, p, 1) for n, p in topics.values()]).values():
                fut.result(30)
            time.sleep(4)  # the shards' topic metadata refresh sees the topics
            warm_up(kafka.bootstrap, topics["commit"][0], KAFKA_OFFSETS_PARTITIONS)
            warm_up(up.bootstrap, topics["commit"][0], 1)
            hb_topic = topics["hb"][0]
            rb_topic, rb_partitions = topics["rebalance"]
            heartbeats = side_by_side(
                lambda _t, b: asyncio.run(
                    heartbeat_scenario(
                        b,
                        hb_topic,
                        opts.hb_groups,
                        opts.hb_members,
                        opts.hb_seconds,
                        opts.hb_window,
                        opts.hb_connections,
                        settle_s=KAFKA_ASSIGNMENT_INTERVAL_S + 0.5,
                    )
                ),
                bootstraps,
            )
            for figures in (heartbeats["kafka"], heartbeats["groupcoord"]):
                figures.pop("target", None)  # e2e-heartbeat's own goal, not a side-by-side figure
            kip848 = [
                {
                    "members": n,
                    **{
                        mode: side_by_side(
                            lambda _t, b, n=n, c=c: asyncio.run(kip848_rebalance(b, rb_topic, rb_partitions, n, c)),
                            bootstraps,
                        )
                        for mode, c in (("concurrent", opts.rebalance_connections), ("sequential", 0))
                    },
                }
                for n in opts.kip848_sizes
            ]
            classic = [
                {
                    "members": n,
                    **side_by_side(
                        lambda _t, b, n=n: classic_rebalance(b, rb_topic, rb_partitions, n, opts.classic_timeout),
                        bootstraps,
                    ),
                }
                for n in opts.classic_sizes
            ]
            offset_commits = side_by_side(
                lambda _t, b: commits(b, topics["commit"][0], opts.committers, opts.commit_seconds), bootstraps
            )
            produce_and_fetch = side_by_side(
                lambda t, b: produce_fetch(b, topics[f"pf-{t}"][0], opts.records, opts.size, opts.rounds), bootstraps
            )
    return {
        "kafka_version": opts.kafka_version,
        "kafka_overrides": overrides,
        "groupcoord": {
            "shards": opts.shards,
            "threads_per_shard": opts.threads,
            "gateway_processes": opts.gateway_processes,
        },
        "cpus": os.cpu_count(),
        "ratios_are": "groupcoord / Kafka: *_per_s higher is better, *_ms lower is better",
        "kip848_heartbeats": heartbeats,
        "rebalance": {
            "topic_partitions": rb_partitions,
            "kip848": kip848,
            "classic_cooperative": classic,
        },
        "offset_commits": offset_commits,
        "produce_fetch": produce_and_fetch,
        "elapsed_s": round(time.monotonic() - begun, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
