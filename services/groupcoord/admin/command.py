"""``groupcoord groups``: list, describe, reset offsets of and delete consumer groups.

In the spirit of Apache Kafka's ``kafka-consumer-groups.sh`` (same columns, same safety rules,
same messages where Kafka has them), and like it a Kafka client of the gateway: point
``--bootstrap`` at ``groupcoord up`` or at a Kubernetes deployment's gateway Service.
Kafka's own tool works against the gateway too (see docs/consumer-groups.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from aiokafka.errors import KafkaError
from kio.schema.errors import ErrorCode

from groupcoord.admin.consumer_groups import (
    AdminError,
    ConsumerGroupsAdmin,
    PartitionRow,
    ResetSpec,
    check_inactive,
    describe_rows,
    parse_datetime,
    parse_topic_partitions,
    reset_plan,
)

HELP = "list, describe, reset offsets of and delete consumer groups (like kafka-consumer-groups.sh)"


def _connection_arguments(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """--bootstrap and --timeout, accepted before and after the action (``groups list
    --bootstrap X`` as Kafka's tool takes them); only the top level sets the defaults."""
    keep = argparse.SUPPRESS
    parser.add_argument(
        "--bootstrap",
        default="127.0.0.1:9092" if defaults else keep,
        metavar="HOST:PORT",
        help="the gateway's bootstrap address (default 127.0.0.1:9092)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0 if defaults else keep,
        help="request timeout in seconds (default 30)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _connection_arguments(parser, defaults=True)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every group")
    listing.add_argument("--state", action="store_true", help="print each group's state too")
    describe = actions.add_parser("describe", help="per partition: committed offset, log end, lag, owner")
    describe.add_argument("groups", nargs="+", metavar="GROUP")
    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets (group must be empty)")
    reset.add_argument("group", metavar="GROUP")
    reset.add_argument("--topic", action="append", required=True, help="TOPIC or TOPIC:P,P (repeatable)")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start")
    target.add_argument("--to-latest", action="store_true", help="the log end")
    target.add_argument(
        "--to-datetime", metavar="ISO", help="first offset at or after this time (UTC if no zone)"
    )
    target.add_argument(
        "--shift-by", type=int, metavar="N", help="current committed offset + N (may be negative)"
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    delete = actions.add_parser("delete", help="delete empty groups and their offsets")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    for action in (listing, describe, reset, delete):
        _connection_arguments(action, defaults=False)


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, as Kafka's tool prints them."""
    cells = [list(header)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


DESCRIBE_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def _describe_line(r: PartitionRow) -> tuple[object, ...]:
    return (
        r.group,
        r.topic,
        r.partition,
        r.current_offset,
        r.log_end_offset,
        r.lag,
        r.consumer_id,
        r.host,
        r.client_id,
    )


async def run_list(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    groups = await admin.list_groups()
    if not args.state:
        print("\n".join(g for g, _ in groups))
        return 0
    described = await admin.describe([g for g, _ in groups]) if groups else []
    print(table(("GROUP", "STATE"), [(d.group_id, d.state) for d in described]))
    return 0


async def run_describe(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    status = 0
    for group in await admin.describe(list(args.groups)):
        committed = await admin.committed(group.group_id)
        if not group.exists and not committed:
            print(f"Error: Consumer group '{group.group_id}' does not exist.", file=sys.stderr)
            status = 1
            continue
        partitions = sorted(set(committed) | {tp for m in group.members for tp in m.assignment})
        bounds = await admin.bounds(partitions)
        print()
        if not group.members:
            print(f"Consumer group '{group.group_id}' has no active members.\n")
        rows = describe_rows(group, committed, bounds.latest)
        print(table(DESCRIBE_HEADER, [_describe_line(r) for r in rows]))
    return status


async def run_reset(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    at = parse_datetime(args.to_datetime) if args.to_datetime else None
    spec = ResetSpec(args.to_earliest, args.to_latest, at, args.shift_by)
    (group,) = await admin.describe([args.group])
    check_inactive(group)
    counts = await admin.partition_counts()
    partitions = sorted({tp for t in args.topic for tp in parse_topic_partitions(t, counts)})
    committed = await admin.committed(args.group)
    plan = reset_plan(spec, partitions, committed, await admin.bounds(partitions, at))
    if args.execute:
        await admin.commit(args.group, plan)
    else:
        print(
            "WARN: No action will be performed as the --execute option is missing. "
            "Add --execute to commit these offsets.",
            file=sys.stderr,
        )
    print()
    print(
        table(
            ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
            [(args.group, tp.topic, tp.partition, o) for tp, o in plan.items()],
        )
    )
    return 0


async def run_delete(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    results = await admin.delete(list(args.groups))
    failed = {g: code for g, code in results.items() if code}
    if not failed:
        names = ", ".join(f"'{g}'" for g in args.groups)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
        return 0
    print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
    for group, code in failed.items():
        print(
            f"* Group '{group}' could not be deleted due to: {ErrorCode(code).name.upper()}", file=sys.stderr
        )
    return 1


ACTIONS = {"list": run_list, "describe": run_describe, "reset-offsets": run_reset, "delete": run_delete}


async def run(args: argparse.Namespace) -> int:
    async with ConsumerGroupsAdmin(args.bootstrap, timeout_s=args.timeout) as admin:
        return await ACTIONS[args.action](admin, args)


def main(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(run(args))
    except AdminError as exc:
        raise SystemExit(f"Error: {exc}") from None
    except (KafkaError, OSError) as exc:
        raise SystemExit(f"Error: {args.bootstrap}: {type(exc).__name__}: {exc}") from None
