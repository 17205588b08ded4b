"""``groupcoord groups``: list, describe, reset offsets of, delete and delete offsets of consumer
groups, and import them from or export them to the upstream cluster's own coordinator.

Apache Kafka's ``kafka-consumer-groups.sh`` as subcommands (``groups describe G`` for
``--describe --group G``), with its options (``--all-groups``, ``--members``/``--offsets``/
``--state`` and ``--verbose``, every ``--reset-offsets`` scenario and scope, ``--export``,
``--delete-offsets``), its column names, state names, messages and safety rules, and its
``--command-config`` of Kafka client properties for TLS and SASL listeners. Like it a Kafka client
of the gateway: point ``--bootstrap`` at ``groupcoord up`` or at a Kubernetes deployment's gateway
Service. ``--output json`` prints one machine-readable document instead of the tables. Kafka's own
tool works against the gateway too (see docs/consumer-groups.md).

Exit status: 0, or 1 when a group could not be described, reset, deleted or have its offsets
deleted (Kafka's tool prints the same errors and exits 0), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition
from kio.schema.errors import ErrorCode

from groupcoord.admin import output
from groupcoord.admin.client_config import CommandConfigError, load_client_config
from groupcoord.admin.consumer_groups import (
    INACTIVE_STATES,
    AdminError,
    ConsumerGroupsAdmin,
    GroupDescription,
    PartitionRow,
    ResetSpec,
    check_partitions_exist,
    describe_rows,
    export_csv,
    parse_datetime,
    parse_duration,
    parse_reset_file,
    parse_topic_partitions,
    reset_plan,
)
from groupcoord.admin.transfer import Side, transfer

HELP = "list, describe, reset offsets of and delete consumer groups (like kafka-consumer-groups.sh)"

DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. "
    "In a future major release, the default behavior of this command will be to prompt the user before "
    "executing the reset rather than doing a dry run. You should add the --dry-run option explicitly "
    "if you are scripting this command and want to keep the current default behavior without prompting."
)


def connection_arguments(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """--bootstrap, --timeout, --command-config and --output, accepted before and after the
    action (``groups list --bootstrap X`` as Kafka's tool takes them); only the top level sets
    the defaults."""
    keep = argparse.SUPPRESS
    parser.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        dest="bootstrap",
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
    parser.add_argument(
        "--command-config",
        default=None if defaults else keep,
        metavar="FILE",
        help="Kafka client properties: security.protocol, sasl.mechanism, sasl.jaas.config, "
        "ssl.truststore.* / ssl.ca.location and ssl.keystore.* as PEM (see docs/consumer-groups.md)",
    )
    parser.add_argument(
        "--output",
        choices=("table", "json"),
        default="table" if defaults else keep,
        help="Kafka's tables (default) or one JSON document",
    )


def one_group_arguments(parser: argparse.ArgumentParser) -> None:
    """GROUP or --group GROUP, for the actions Kafka's tools run on one group only."""
    parser.add_argument("group", nargs="?", metavar="GROUP")
    parser.add_argument("--group", dest="group_option", metavar="GROUP", help="the group (or GROUP)")


def one_group(args: argparse.Namespace) -> str:
    """The group :func:`one_group_arguments` named, exactly one."""
    group = args.group or args.group_option
    if not group or (args.group and args.group_option):
        raise AdminError(f"Option {args.action} takes exactly one group: GROUP or --group GROUP")
    return str(group)


def groups_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("groups", nargs="*", metavar="GROUP")
    parser.add_argument(
        "--group", dest="more_groups", action="append", default=[], metavar="GROUP", help=what
    )
    parser.add_argument("--all-groups", action="store_true", help="every group")


def reset_arguments(reset: argparse.ArgumentParser, all_topics: str, *, relative: bool) -> None:
    """``reset-offsets``' scope, target and mode, as Kafka's group tools take them (``relative``:
    ``--by-duration`` and ``--shift-by`` too, which ``kafka-share-groups.sh`` has not)."""
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", help="TOPIC or TOPIC:P,P (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help=all_topics)
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start")
    target.add_argument("--to-latest", action="store_true", help="the log end")
    target.add_argument(
        "--to-current", action="store_true", help="the current offset (the log end if none)"
    )
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    target.add_argument(
        "--to-datetime", metavar="ISO", help="first offset at or after this time (UTC if no zone)"
    )
    if relative:
        target.add_argument(
            "--by-duration",
            metavar="PnDTnHnMnS",
            help="first offset at or after now minus this ISO 8601 duration",
        )
        target.add_argument(
            "--shift-by", type=int, metavar="N", help="current committed offset + N (may be negative)"
        )
    target.add_argument(
        "--from-file", metavar="CSV", help="offsets from Kafka's CSV (topic,partition,offset per line)"
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the new offsets only")
    mode.add_argument("--execute", action="store_true", help="set the new offsets")
    reset.add_argument("--export", action="store_true", help="print the plan as --from-file's CSV")


def list_and_describe_parsers(
    parser: argparse.ArgumentParser, what: str, rows: str, describes: str
) -> tuple[argparse._SubParsersAction[argparse.ArgumentParser], argparse.ArgumentParser, argparse.ArgumentParser]:
    """The actions, and ``list`` and ``describe`` with the options Kafka's group tools share
    (``what``: "group" or "share group"; ``rows``: what ``--offsets`` prints a row for, and
    ``describes``: what it prints of each)."""
    connection_arguments(parser, defaults=True)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help=f"every {what}")
    listing.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATES",
        help="print each group's state too; with STATES (e.g. Stable,Empty) only groups in those",
    )
    describe = actions.add_parser("describe", help=f"per {rows}: {describes}")
    groups_arguments(describe, f"a {what} to describe (repeatable; or GROUP...)")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help=f"per {rows} (the default)")
    view.add_argument("--members", action="store_true", help="per member")
    view.add_argument("--state", action="store_true", help="the group's state and coordinator")
    describe.add_argument("--verbose", action="store_true", help="more columns")
    return actions, listing, describe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions, listing, describe = list_and_describe_parsers(
        parser, "group", "partition", "committed offset, log end, lag, owner"
    )
    listing.add_argument(
        "--type",
        nargs="?",
        const="",
        default=None,
        metavar="TYPES",
        help="print each group's type (Classic, Consumer) too; with TYPES (e.g. consumer) only those",
    )
    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets (group must be empty)")
    groups_arguments(reset, "a group to reset (repeatable; or GROUP...)")
    reset_arguments(reset, "every partition the group has committed", relative=True)
    delete = actions.add_parser("delete", help="delete empty groups and their offsets")
    groups_arguments(delete, "a group to delete (repeatable; or GROUP...)")
    delete_offsets = actions.add_parser(
        "delete-offsets", help="delete a group's committed offsets of some topics (as --delete-offsets)"
    )
    one_group_arguments(delete_offsets)
    delete_offsets.add_argument(
        "--topic", action="append", required=True, help="TOPIC or TOPIC:P,P (repeatable)"
    )
    moves = []
    for name, what in (
        ("import", "the upstream's own coordinator into groupcoord (adopt groups in bulk)"),
        ("export", "groupcoord back to the upstream's own coordinator (leave, or let lag tools see them)"),
    ):
        move = actions.add_parser(name, help=f"copy empty groups' committed offsets from {what}")
        groups_arguments(move, f"a group to {name} (repeatable; or GROUP...)")
        move.add_argument(
            "--upstream",
            required=True,
            metavar="HOST:PORT",
            help="a bootstrap broker of the upstream cluster itself (not the gateway)",
        )
        move.add_argument(
            "--upstream-command-config",
            metavar="FILE",
            help="Kafka client properties for the upstream's brokers (as --command-config)",
        )
        mode = move.add_mutually_exclusive_group()
        mode.add_argument("--dry-run", action="store_true", help="print the offsets only (the default)")
        mode.add_argument("--execute", action="store_true", help="commit them on the other side")
        moves.append(move)
    describe.add_argument(
        "--upstream",
        metavar="HOST:PORT",
        help="also show each group on the upstream's own coordinator and where its adoption stands",
    )
    describe.add_argument("--upstream-command-config", metavar="FILE", help="as for import")
    for action in (listing, describe, reset, delete, delete_offsets, *moves):
        connection_arguments(action, defaults=False)


def _error(message: str) -> None:
    print(f"Error: {message}", file=sys.stderr)


async def _group_ids(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> list[str]:
    """The groups named (positionally or by --group), or every group with --all-groups."""
    named = [*args.groups, *args.more_groups]
    if args.all_groups:
        if named:
            raise AdminError("Option --all-groups cannot be used with a group")
        return [g for g, _ in await admin.list_groups()]
    if not named:
        raise AdminError(f"Option {args.action} takes one of these options: GROUP, --group, --all-groups")
    return list(dict.fromkeys(named))


def parse_states(text: str, states: Sequence[str] = output.STATES) -> set[str]:
    """``--state``'s list (any case) as Kafka's state names; Kafka's message if one is unknown."""
    by_lower = {s.lower(): s for s in states}
    chosen = {by_lower.get(s.strip().lower()) for s in text.split(",") if s.strip()}
    if None in chosen or not chosen:
        raise AdminError(f"Invalid state list '{text}'. Valid states are: {', '.join(states)}")
    return {s for s in chosen if s is not None}


async def run_list(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    groups = await admin.list_groups()
    wanted = parse_states(args.state) if args.state else None
    kinds = _types(args.type) if args.type else None
    if args.state is None and args.type is None and args.output == "table":
        print("\n".join(g for g, _ in groups))
        return 0
    described = await admin.describe([g for g, _ in groups]) if groups else []
    chosen = [
        d
        for d in described
        if (wanted is None or d.state in wanted) and (kinds is None or d.group_type in kinds)
    ]
    if args.output == "json":
        print(output.document({"groups": [output.group_json(d) for d in chosen]}))
    else:
        print(output.list_table(chosen, types=args.type is not None, states=args.state is not None))
    return 0


def _types(text: str) -> set[str]:
    chosen = {t.strip().capitalize() for t in text.split(",") if t.strip()}
    if not chosen or chosen - {"Classic", "Consumer"}:
        raise AdminError(f"Invalid types list '{text}'. Valid types are: classic, consumer")
    return chosen


async def _describe_one(
    admin: ConsumerGroupsAdmin, group: GroupDescription, args: argparse.Namespace
) -> tuple[dict[str, Any] | None, str | None]:
    """One group's JSON object and table text (None, None: it does not exist)."""
    committed = await admin.committed(group.group_id)
    if not group.exists and not committed:
        return None, None
    doc = output.group_json(group)
    notice = output.group_notice(group)
    if args.members:
        doc["consumers"] = output.members_json(group)
        text = output.members_table(group, verbose=args.verbose)
    elif args.state:
        coordinator = await admin.coordinator(group.group_id)
        doc["coordinator"] = {"id": coordinator.node_id, "host": coordinator.host, "port": coordinator.port}
        text = output.state_table(group, coordinator, verbose=args.verbose)
    else:
        partitions = sorted(set(committed) | {tp for m in group.members for tp in m.assignment})
        bounds = await admin.bounds(partitions)
        epochs = await admin.leader_epochs(group.group_id) if args.verbose else {}
        rows: list[PartitionRow] = describe_rows(group, committed, bounds.latest, epochs)
        doc["offsets"] = output.offsets_json(rows)
        text = output.offsets_table(rows, verbose=args.verbose)
    return doc, (f"\n{notice}\n\n{text}" if notice else f"\n{text}")


async def run_describe(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    if getattr(args, "upstream", None):
        return await _describe_with_upstream(admin, args)
    return await _describe(admin, args, {})


async def _describe(
    admin: ConsumerGroupsAdmin, args: argparse.Namespace, upstream: Mapping[str, dict[str, Any]]
) -> int:
    status = 0
    docs = []
    described = await admin.describe(await _group_ids(admin, args))
    for group in sorted(described, key=lambda g: g.group_id):  # Kafka prints them sorted
        doc, text = await _describe_one(admin, group, args)
        there = upstream.get(group.group_id)
        if there is not None:
            there["adoption"] = adoption_state(held=doc is not None, upstream=there)
            if doc is None:
                doc, text = {"group": group.group_id}, ""
            doc["upstream"] = there
            text = f"{text}\n{output.upstream_line(there)}"
        if doc is None:
            _error(f"Consumer group '{group.group_id}' does not exist.")
            status = 1
            continue
        docs.append(doc)
        if args.output == "table":
            print(text)
    if args.output == "json":
        print(output.document({"groups": docs}))
    return status


def adoption_state(*, held: bool, upstream: Mapping[str, Any]) -> str:
    """Where a group stands between the upstream's coordinator and groupcoord (docs/adoption.md)."""
    if held:
        return "ours"
    if upstream["members"] or upstream["state"] not in INACTIVE_STATES:
        return "upstream-served"  # the gateway holds its members back until the upstream's leave
    return "adopted on first touch" if upstream["offsets"] else "new"


async def _describe_with_upstream(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    """``describe --upstream``: each group also as the upstream's own coordinator holds it, and
    where its adoption stands (a rolling move: upstream-served until its last member left)."""
    async with upstream_admin(args) as upstream:
        side = Side(upstream, f"the upstream {args.upstream}")
        found = {}
        for group_id in await _group_ids(admin, args):
            there = await side.group(group_id)
            found[group_id] = {
                "bootstrap": args.upstream,
                "state": there.state,
                "members": there.members,
                "offsets": len(there.offsets),
                "pending_transactional": len(there.unstable),
            }
    return await _describe(admin, args, found)


def reset_spec(args: argparse.Namespace, file_plan: dict[TopicPartition, int] | None) -> ResetSpec:
    at = None
    if args.to_datetime:
        at = parse_datetime(args.to_datetime)
    elif getattr(args, "by_duration", None):
        at = datetime.now(UTC) - parse_duration(args.by_duration)
    return ResetSpec(
        to_earliest=args.to_earliest,
        to_latest=args.to_latest,
        to_datetime=at,
        shift_by=getattr(args, "shift_by", None),
        to_offset=args.to_offset,
        to_current=args.to_current,
        from_file=file_plan,
    )


def read_plan(path: str, groups: list[str]) -> dict[str, dict[TopicPartition, int]]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_reset_file(f.read(), groups)
    except OSError as exc:
        raise AdminError(f"--from-file {path}: {exc.strerror or exc}") from None


async def run_reset(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    if not (args.topic or args.all_topics or args.from_file):
        raise AdminError("One of the reset scopes should be defined: --all-topics, --topic.")
    group_ids = await _group_ids(admin, args)
    file_plans = read_plan(args.from_file, group_ids) if args.from_file else None
    if args.by_duration:
        parse_duration(args.by_duration)  # a bad duration is refused before anything is fetched
    if args.to_datetime:
        parse_datetime(args.to_datetime)
    counts = await admin.partition_counts()
    plans: dict[str, dict[TopicPartition, int]] = {}
    errors: dict[str, str] = {}
    for group in await admin.describe(group_ids):
        gid = group.group_id
        if group.state not in INACTIVE_STATES:
            errors[gid] = (
                f"Assignments can only be reset if the group '{gid}' is inactive, "
                f"but the current state is {group.state}."
            )
            plans[gid] = {}
            continue
        committed = await admin.committed(gid)
        file_plan = None
        if file_plans is not None:
            if gid not in file_plans:
                errors[gid] = f"No reset plan for group {gid} found."
                plans[gid] = {}
                continue
            file_plan = file_plans[gid]
            partitions = sorted(file_plan)
        elif args.all_topics:
            partitions = sorted(committed)
        else:
            partitions = sorted({tp for t in args.topic for tp in parse_topic_partitions(t, counts)})
        check_partitions_exist(partitions, counts)
        spec = reset_spec(args, file_plan)
        plan = reset_plan(spec, partitions, committed, await admin.bounds(partitions, spec.to_datetime))
        if args.execute and plan:
            await admin.commit(gid, plan)
        plans[gid] = plan
    for message in errors.values():
        _error(message)
    if not args.execute and not args.dry_run:
        print(DRY_RUN_WARNING, file=sys.stderr)
    if args.output == "json":
        print(
            output.document(
                {
                    "executed": bool(args.execute),
                    "groups": [
                        {"group": g, "offsets": output.plan_json(p), "error": errors.get(g)}
                        for g, p in plans.items()
                    ],
                }
            )
        )
    elif args.export:
        single = len([*args.groups, *args.more_groups]) == 1 and not args.all_groups
        print(export_csv(plans, with_group=not single), end="")
    else:
        print()
        print(output.reset_table(plans))  # a refused group's header too, as Kafka prints it
    return 1 if errors else 0


async def run_delete(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    group_ids = await _group_ids(admin, args)
    results = await admin.delete(group_ids)
    failed = {g: ErrorCode(code).name.upper() for g, code in results.items() if code}
    deleted = [g for g in group_ids if not results.get(g)]
    if args.output == "json":
        print(output.document({"deleted": deleted, "failed": failed}))
        return 1 if failed else 0
    if not failed:
        names = ", ".join(f"'{g}'" for g in deleted)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
        return 0
    print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
    for group, name in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {name}", file=sys.stderr)
    if deleted:
        print(f"\nThese consumer groups were deleted successfully: {', '.join(repr(g) for g in deleted)}")
    return 1


async def run_delete_offsets(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    """Kafka's ``--delete-offsets``: TOPIC:P,P as given; a TOPIC's partitions from the metadata
    (a topic that does not exist is reported with partition ``-``, the others still deleted)."""
    args.group = one_group(args)
    counts = await admin.partition_counts()
    partitions: set[TopicPartition] = set()
    results: dict[TopicPartition, int] = {}
    for spec in args.topic:
        topic, _, listed = spec.partition(":")
        if listed:
            try:
                partitions |= {TopicPartition(topic, int(p)) for p in listed.split(",")}
            except ValueError:
                raise AdminError(f"Invalid partition in topic arg '{spec}'") from None
        elif topic in counts:
            partitions |= {TopicPartition(topic, p) for p in range(counts[topic])}
        else:
            results[TopicPartition(topic, -1)] = 3  # UNKNOWN_TOPIC_OR_PARTITION
    error = 0
    if partitions:
        error, codes = await admin.delete_offsets(args.group, partitions)
        for tp in partitions:
            results[tp] = codes.get(tp, error)
        if not error:
            error = next((c for _, c in sorted(codes.items()) if c), 0)
    if not error:
        error = next((c for c in results.values() if c), 0)
    name = ErrorCode(error).name.upper() if error else "NONE"
    if args.output == "json":
        doc = {
            "group": args.group,
            "error": name if error else None,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition if tp.partition >= 0 else None,
                    "status": "Successful" if code == 0 else ErrorCode(code).name.upper(),
                }
                for tp, code in sorted(results.items())
            ],
        }
        print(output.document(doc))
    else:
        summary = output.delete_offsets_summary(args.group, error, name)
        print(summary if not error else f"\n{summary}")
        print()
        print(output.delete_offsets_table(results))
    return 1 if error else 0


def upstream_admin(args: argparse.Namespace) -> ConsumerGroupsAdmin:
    """An admin of the upstream cluster itself (``--upstream``, ``--upstream-command-config``),
    to use as ``async with``."""
    try:
        config = load_client_config(args.upstream_command_config)
    except CommandConfigError as exc:
        raise AdminError(f"--upstream-command-config: {exc}") from None
    return ConsumerGroupsAdmin(
        args.upstream,
        client_id=config.client_id or "groupcoord-admin",
        timeout_s=args.timeout,
        security=config.security,
    )


async def run_transfer(admin: ConsumerGroupsAdmin, args: argparse.Namespace) -> int:
    """``import`` (upstream → gateway) and ``export`` (gateway → upstream): admin/transfer.py."""
    async with upstream_admin(args) as upstream:
        sides = (Side(upstream, f"the upstream {args.upstream}"), Side(admin, f"groupcoord {args.bootstrap}"))
        source, target = sides if args.action == "import" else sides[::-1]
        group_ids = await _group_ids(source.admin, args)
        moves = await transfer(source, target, group_ids, execute=args.execute)
    errors = [m.error for m in moves if m.error]
    for message in errors:
        _error(message)
    if not args.execute and not args.dry_run:
        print(DRY_RUN_WARNING, file=sys.stderr)
    if args.output == "json":
        doc = {
            "executed": bool(args.execute),
            "from": source.name,
            "to": target.name,
            "groups": [{"group": m.group, "offsets": output.plan_json(m.offsets), "error": m.error} for m in moves],
        }
        print(output.document(doc))
    else:
        print()
        print(output.reset_table({m.group: m.offsets for m in moves}))
    return 1 if errors else 0


ACTIONS = {
    "list": run_list,
    "describe": run_describe,
    "reset-offsets": run_reset,
    "delete": run_delete,
    "delete-offsets": run_delete_offsets,
    "import": run_transfer,
    "export": run_transfer,
}


def main(args: argparse.Namespace) -> int:
    return run_admin(args, ConsumerGroupsAdmin, ACTIONS)


A = TypeVar("A", bound=ConsumerGroupsAdmin)


def run_admin(
    args: argparse.Namespace,
    admin_type: type[A],
    actions: Mapping[str, Callable[[A, argparse.Namespace], Awaitable[int]]],
) -> int:
    """Load ``--command-config``, connect an ``admin_type`` to ``--bootstrap`` and run the
    action; a refusal or a connection failure ends the command with one line (``Error: ...``),
    never a traceback."""
    try:
        config = load_client_config(args.command_config)
    except CommandConfigError as exc:
        raise SystemExit(f"Error: --command-config: {exc}") from None
    warning = config.warning()
    if warning:
        print(warning, file=sys.stderr)

    async def run() -> int:
        async with admin_type(
            args.bootstrap,
            client_id=config.client_id or "groupcoord-admin",
            timeout_s=args.timeout,
            security=config.security,
        ) as admin:
            return await actions[args.action](admin, args)

    try:
        return asyncio.run(run())
    except AdminError as exc:
        raise SystemExit(f"Error: {exc}") from None
    except (KafkaError, OSError) as exc:
        raise SystemExit(f"Error: {args.bootstrap}: {type(exc).__name__}: {exc}") from None
