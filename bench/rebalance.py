"""rebalance: a 100-member KIP-848 group, one member joins — how long until it is stable again,
and how many members had any partition revoked (incremental: only those that must give one up).

Members are simulated with raw ConsumerGroupHeartbeat v1 requests through the gateway of a
local cluster (real shards, real broker); "stable" means a full heartbeat round in which no
member's epoch or assignment changed.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

NAME = "rebalance"
DESCRIPTION = "time until a 100-member KIP-848 group is stable after one join; members with revocations"


async def scenario(bootstrap: str, topic: str, members: int) -> dict[str, object]:
    from _kip848_members import Connection, Member, converge  # noqa: PLC0415

    host, port = bootstrap.rsplit(":", 1)
    conn = await Connection(host, int(port)).open()
    group = f"rb-{uuid.uuid4().hex[:6]}"
    group_members = [Member(group) for _ in range(members)]
    for m in group_members:
        await conn.heartbeat(m, topic, joining=True)
    await converge(conn, group_members)
    for m in group_members:
        m.revoked_ever = False
    start = time.perf_counter()
    newcomer = Member(group)
    await conn.heartbeat(newcomer, topic, joining=True)
    rounds = await converge(conn, [*group_members, newcomer])
    elapsed = time.perf_counter() - start
    conn.close()
    return {
        "members_before": members,
        "stable_after_join_ms": round(elapsed * 1000, 1),
        "heartbeat_rounds": rounds,
        "members_with_revocations": sum(m.revoked_ever for m in group_members),
        "newcomer_partitions": sum(len(p) for p in newcomer.owned.values()),
    }


def run(args: list[str]) -> dict[str, object]:
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    from groupcoord.embedded_broker import EmbeddedBroker  # noqa: PLC0415
    from groupcoord.local_cluster import ClusterOptions  # noqa: PLC0415
    from groupcoord_testing import BackgroundCluster  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=200, help="topic partitions")
    opts = parser.parse_args(args)
    with (
        EmbeddedBroker() as broker,
        BackgroundCluster((broker.host, broker.port), ClusterOptions(port=0, metrics=False)) as cluster,
    ):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = f"rb-{uuid.uuid4().hex[:6]}"
        for fut in admin.create_topics([NewTopic(topic, opts.partitions, 1)]).values():
            fut.result(15)
        time.sleep(4)  # the shards' topic metadata refresh sees the topic
        return asyncio.run(scenario(cluster.bootstrap, topic, opts.members))
