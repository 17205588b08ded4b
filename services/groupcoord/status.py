"""``groupcoord status``: each state-topic partition's leader, epoch and state, and group counts.

Reads the local cluster's state file (written by ``groupcoord up``) for the shard addresses
and asks every shard for its partitions over ``ShardControl.Status``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter

import grpc

from groupcoord.common import internal_tls
from groupcoord.local_cluster import state_file
from groupcoord.rpc.v1 import shard_control_pb2 as sc
from groupcoord.rpc.v1 import shard_control_pb2_grpc as sc_grpc

HELP = "show partition leaders, epochs, states and group counts of a local cluster"
STATES = {
    v.number: v.name.removeprefix("PARTITION_STATE_").lower() for v in sc.PartitionState.DESCRIPTOR.values
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=int, default=9092, help="the gateway port of `groupcoord up` (default 9092)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


async def collect(state: dict) -> list[dict]:
    """A row per partition of each shard (``{"shard", "error"}`` for one unreachable), and a row
    ``{"shard", "state_topic_problems"}`` for a shard that found its state topic misconfigured."""
    rows: list[dict] = []
    # the control plane's certificate, which `groupcoord up` names in its state file
    tls_dir = state.get("internal_tls_dir")
    tls = internal_tls.InternalTls.from_dir(tls_dir) if tls_dir else None

    async def one(shard_id: str, info: dict) -> None:
        async with internal_tls.channel(tls, f"{info['host']}:{info['grpc_port']}") as channel:
            try:
                resp = await sc_grpc.ShardControlStub(channel).Status(sc.StatusRequest(), timeout=5)
            except grpc.aio.AioRpcError as exc:
                rows.append({"shard": shard_id, "error": exc.code().name})
                return
            if resp.state_topic_problems:
                rows.append({"shard": shard_id, "state_topic_problems": list(resp.state_topic_problems)})
            for p in resp.partitions:
                rows.append(
                    {
                        "shard": shard_id,
                        "partition": p.partition,
                        "state": STATES.get(p.state, "unknown"),
                        "epoch": p.epoch,
                        "worker": p.worker,
                        "groups": dict(p.group_counts),
                        "load_time_ms": p.load_time_ms,
                    }
                )

    await asyncio.gather(*(one(s, i) for s, i in state["shards"].items()))
    return sorted(rows, key=lambda r: (r.get("partition", -1), r["shard"]))


def main(args: argparse.Namespace) -> int:
    path = state_file(args.port)
    if not path.exists():
        print(f"no local cluster on port {args.port} (no {path}); start one with `groupcoord up`")
        return 1
    state = json.loads(path.read_text())
    rows = asyncio.run(collect(state))
    if args.json:
        print(json.dumps({"placement": state["placement"], "partitions": rows}, indent=2))
        return 0
    totals: Counter[str] = Counter()
    print(f"{'partition':>9} {'leader':>6} {'epoch':>5} {'state':>8} {'worker':>6}  groups")
    for row in rows:
        if "error" in row:
            print(f"shard {row['shard']}: unreachable ({row['error']})")
            continue
        if "state_topic_problems" in row:
            for problem in row["state_topic_problems"]:
                print(f"WARNING shard {row['shard']}: {problem}")
            continue
        if row["state"] == "standby":
            continue
        totals.update(row["groups"])
        groups = ", ".join(f"{k}={v}" for k, v in sorted(row["groups"].items())) or "-"
        print(
            f"{row['partition']:>9} {row['shard']:>6} {row['epoch']:>5} {row['state']:>8} {row['worker']:>6}  {groups}"
        )
    print("groups: " + (", ".join(f"{k}={v}" for k, v in sorted(totals.items())) or "none"))
    return 0
