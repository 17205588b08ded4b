"""``groupcoord share-groups``: list, describe, reset offsets of and delete offsets of share
groups (KIP-932).

Apache Kafka's ``kafka-share-groups.sh`` as subcommands (``share-groups describe G`` for
``--describe --group G``), with its options (``--all-groups``, ``--members``/``--offsets``/
``--state``, ``--verbose``, ``list --state [STATES]``, ``reset-offsets`` with its scopes and
targets, ``--dry-run``/``--execute``/``--export``, ``delete-offsets --topic``), its column names
and messages, and the ``--command-config``, ``--bootstrap`` and ``--output json`` of ``groupcoord
groups``. Kafka's own tool works against the gateway too.

Exit status: 0, or 1 when a group could not be described, reset or have its offsets deleted
(Kafka's tool prints the same errors and exits 0 for some), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from aiokafka.structs import TopicPartition

from groupcoord.admin import command as groups_command
from groupcoord.admin import output
from groupcoord.admin.consumer_groups import (
    AdminError,
    check_partitions_exist,
    export_csv,
    parse_topic_partitions,
    reset_plan,
)
from groupcoord.admin.share_groups import (
    STATES,
    ShareGroup,
    ShareGroupsAdmin,
    delete_offsets_table,
    error_message,
    failed,
    list_table,
    members_table,
    offsets_table,
    state_table,
)

HELP = "list, describe, reset offsets of and delete offsets of share groups (like kafka-share-groups.sh)"
GROUP_ID_NOT_FOUND = 69


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions, listing, describe = groups_command.list_and_describe_parsers(
        parser, "share group", "share-partition", "start offset and lag"
    )
    reset = actions.add_parser("reset-offsets", help="move a share group's start offsets (group must be empty)")
    groups_command.one_group_arguments(reset)
    groups_command.reset_arguments(reset, "every share-partition the group has", relative=False)
    delete_offsets = actions.add_parser(
        "delete-offsets", help="delete a share group's offsets of whole topics (group must be empty)"
    )
    groups_command.one_group_arguments(delete_offsets)
    delete_offsets.add_argument("--topic", action="append", required=True, help="a topic (repeatable)")
    for action in (listing, describe, reset, delete_offsets):
        groups_command.connection_arguments(action, defaults=False)


async def _state(admin: ShareGroupsAdmin, group_id: str) -> str | None:
    """The group's state, None when there is no such group (its offsets may still be set)."""
    try:
        return (await admin.describe_share_groups([group_id]))[0].state
    except AdminError as exc:
        if exc.code == GROUP_ID_NOT_FOUND:
            return None
        raise


async def run_reset(admin: ShareGroupsAdmin, args: argparse.Namespace) -> int:
    """Kafka's ``ShareGroupCommand.resetOffsets``: one empty (or not yet existing) group; the
    plan from the upstream's offsets, its current start offsets for ``--to-current``; with
    ``--execute`` set by AlterShareGroupOffsets."""
    group_id = groups_command.one_group(args)
    if not (args.dry_run or args.execute):
        raise AdminError("Option [reset-offsets] takes the option: [execute] or [dry-run]")
    if not (args.topic or args.all_topics or args.from_file):
        raise AdminError("Option [reset-offsets] takes one of these options: [all-topics], [from-file], [topic]")
    file_plan = groups_command.read_plan(args.from_file, [group_id])[group_id] if args.from_file else None
    state = await _state(admin, group_id)
    if state not in (None, "Empty"):
        print(f"Share group '{group_id}' is not empty.", file=sys.stderr)
        return 1
    current = {TopicPartition(r.topic, r.partition): r.start_offset for r in await admin.share_start_offsets(group_id)} if state else {}
    counts = await admin.partition_counts()
    if file_plan is not None:
        partitions = sorted(file_plan)
    elif args.all_topics:
        partitions = sorted(current)
    else:
        try:
            partitions = sorted({tp for t in args.topic for tp in parse_topic_partitions(t, counts)})
        except AdminError:
            raise AdminError(f"Executing share group command failed due to {error_message(3)}") from None
    check_partitions_exist(partitions, counts)
    spec = groups_command.reset_spec(args, file_plan)
    committed = {tp: o for tp, o in current.items() if o is not None}
    plan = reset_plan(spec, partitions, committed, await admin.bounds(partitions, spec.to_datetime))
    if args.execute and plan:
        code, message = await admin.alter_share_offsets(group_id, plan)
        if code:
            raise failed(code, message)
    if args.output == "json":
        print(output.document({"executed": bool(args.execute), "group": group_id, "offsets": output.plan_json(plan)}))
    elif args.export:
        print(export_csv({group_id: plan}, with_group=False), end="")
    else:
        print(output.reset_table({group_id: plan}))
    return 0


async def run_delete_offsets(admin: ShareGroupsAdmin, args: argparse.Namespace) -> int:
    """Kafka's ``--delete-offsets``: whole topics, one group; a group-level refusal (not empty,
    no such group) is printed first and on every topic's row, as Kafka's tool prints it."""
    group_id = groups_command.one_group(args)
    topics = list(dict.fromkeys(args.topic))
    (code, message), per_topic = await admin.delete_share_offsets(group_id, topics)
    results = {t: (code, message) if code else per_topic.get(t, (0, None)) for t in topics}
    if args.output == "json":
        doc = {
            "group": group_id,
            "error": error_message(code, message) if code else None,
            "topics": [
                {"topic": t, "status": "Successful" if c == 0 else error_message(c, m)} for t, (c, m) in sorted(results.items())
            ],
        }
        print(output.document(doc))
    else:
        if code:
            print(f"Error: {error_message(code, message)}\n")
        print(delete_offsets_table(results))
    return 1 if code or any(c for c, _ in results.values()) else 0


async def run_list(admin: ShareGroupsAdmin, args: argparse.Namespace) -> int:
    names = await admin.list_share_groups()
    if args.state is None and args.output == "table":
        print("\n".join(names))
        return 0
    wanted = groups_command.parse_states(args.state, STATES) if args.state else None
    chosen = [g for g in await admin.describe_share_groups(names) if wanted is None or g.state in wanted]
    if args.output == "json":
        print(output.document({"groups": [{"group": g.group_id, "state": g.state} for g in chosen]}))
    else:
        print(list_table(chosen))
    return 0


def _group_json(group: ShareGroup) -> dict[str, Any]:
    return {
        "group": group.group_id,
        "state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
    }


async def _describe_one(admin: ShareGroupsAdmin, group: ShareGroup, args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    """One group's JSON object and table text (None: nothing to print, as Kafka's tool)."""
    doc = _group_json(group)
    if args.members:
        doc["members"] = [{**asdict(m), "assignment": [list(tp) for tp in m.assignment]} for m in group.members]
        if not group.members:
            print(f"Share group '{group.group_id}' has no active members.", file=sys.stderr)
            return doc, None
        return doc, members_table(group, verbose=args.verbose)
    if args.state:
        coordinator = await admin.coordinator(group.group_id)
        doc["coordinator"] = {"id": coordinator.node_id, "host": coordinator.host, "port": coordinator.port}
        return doc, state_table(group, coordinator, verbose=args.verbose)
    rows = await admin.share_start_offsets(group.group_id)
    doc["offsets"] = [asdict(r) for r in rows]
    if not rows:  # none read yet, or deleted
        return doc, f"Share group '{group.group_id}' has no offset information."
    return doc, offsets_table(group.group_id, rows, verbose=args.verbose)


async def run_describe(admin: ShareGroupsAdmin, args: argparse.Namespace) -> int:
    if args.all_groups:
        group_ids = await admin.list_share_groups()
    else:
        group_ids = sorted(dict.fromkeys([*args.groups, *args.more_groups]))
        if not group_ids:
            raise AdminError("Option [describe] takes one of these options: [all-groups], [group]")
    docs = []
    for group in await admin.describe_share_groups(group_ids):
        doc, text = await _describe_one(admin, group, args)
        docs.append(doc)
        if args.output == "table" and text is not None:
            print(f"\n{text}")
    if args.output == "json":
        print(output.document({"groups": docs}))
    return 0


ACTIONS = {
    "list": run_list,
    "describe": run_describe,
    "reset-offsets": run_reset,
    "delete-offsets": run_delete_offsets,
}


def main(args: argparse.Namespace) -> int:
    return groups_command.run_admin(args, ShareGroupsAdmin, ACTIONS)
