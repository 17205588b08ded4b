"""lag-heartbeat: what computing consumer lag on the shards costs heartbeats.

The same e2e-heartbeat load (KIP-848 steady-state heartbeats through gateway + shards, run as
`groupcoord up`) twice, on a cluster whose shards also hold the committed offsets of C groups
on a P-partition topic: once with the lag loop off (``--lag-interval 0``), once with it running
every I seconds (default 1 s, 15× the production rate). Prints both runs' heartbeats/s and
p50/p99 and the ratios; the lag loop runs off the request path, so the ratios should be ~1.
"""

from __future__ import annotations

import argparse
import time
import uuid

NAME = "lag-heartbeat"
DESCRIPTION = "heartbeats/s and p99 with the consumer-lag loop off vs every second (committed groups)"


def _commit_groups(bootstrap: str, topic: str, groups: int, partitions: int) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, groups, 50):
        futures = []
        for g in range(start, min(groups, start + 50)):
            request = ConsumerGroupTopicPartitions(
                f"lagged-{g}", [TopicPartition(topic, p, 1) for p in range(partitions)]
            )
            futures.extend(admin.alter_consumer_group_offsets([request]).values())
        for fut in futures:
            fut.result(30)


def run(args: list[str]) -> dict[str, object]:
    from _up_process import UpProcess  # noqa: PLC0415
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from e2e_heartbeat import add_load_options, on_off_ratios, run_load  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker, free_port  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    add_load_options(parser)
    parser.add_argument("--committed-groups", type=int, default=1000, help="groups with committed offsets")
    parser.add_argument("--partitions", type=int, default=12, help="partitions of the committed topic")
    parser.add_argument("--lag-interval", type=float, default=1.0)
    opts = parser.parse_args(args)
    runs: dict[str, dict] = {}
    for mode, interval in (("lag_off", 0.0), ("lag_on", opts.lag_interval)):
        with (
            EmbeddedBroker() as broker,
            UpProcess(broker.bootstrap, free_port(), extra=["--lag-interval", str(interval)]) as up,
        ):
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            topic = f"lag-{uuid.uuid4().hex[:6]}"
            for fut in admin.create_topics([NewTopic(topic, opts.partitions, 1)]).values():
                fut.result(15)
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            for p in range(opts.partitions):
                producer.produce(topic, b"x", partition=p)
                producer.produce(topic, b"x", partition=p)
            producer.flush(15)
            started = time.perf_counter()
            _commit_groups(up.bootstrap, topic, opts.committed_groups, opts.partitions)
            commit_s = time.perf_counter() - started
            time.sleep(max(4.0, 3 * interval))  # metadata refresh sees the topic; lag rounds run
            result = run_load(up.bootstrap, topic, opts)
            runs[mode] = {"lag_interval_s": interval, "commit_setup_s": round(commit_s, 1), **result}
    off, on = runs["lag_off"], runs["lag_on"]
    return {
        "committed_groups": opts.committed_groups,
        "committed_partitions": opts.committed_groups * opts.partitions,
        **runs,
        **on_off_ratios(off, on),
    }
