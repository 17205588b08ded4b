"""``groupcoord share-groups``: list and describe share groups (KIP-932).

Apache Kafka's ``kafka-share-groups.sh`` as subcommands (``share-groups describe G`` for
``--describe --group G``), with its options (``--all-groups``, ``--members``/``--offsets``/
``--state``, ``--verbose``, ``list --state [STATES]``), its column names and messages, and the
``--command-config``, ``--bootstrap`` and ``--output json`` of ``groupcoord groups``. Kafka's own
tool works against the gateway too, and resets and deletes share-group offsets.

Exit status: 0, or 1 when a group could not be described, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from groupcoord.admin import command as groups_command
from groupcoord.admin import output
from groupcoord.admin.consumer_groups import AdminError
from groupcoord.admin.share_groups import (
    STATES,
    ShareGroup,
    ShareGroupsAdmin,
    list_table,
    members_table,
    offsets_table,
    state_table,
)

HELP = "list and describe share groups (like kafka-share-groups.sh)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _, listing, describe = groups_command.list_and_describe_parsers(
        parser, "share group", "share-partition", "start offset and lag"
    )
    for action in (listing, describe):
        groups_command.connection_arguments(action, defaults=False)


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


ACTIONS = {"list": run_list, "describe": run_describe}


def main(args: argparse.Namespace) -> int:
    return groups_command.run_admin(args, ShareGroupsAdmin, ACTIONS)
