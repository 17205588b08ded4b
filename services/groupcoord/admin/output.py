"""What ``groupcoord groups`` prints: Kafka's ``ConsumerGroupCommand`` tables (its column names,
its column widths — at least 15 characters for names, 10 for partitions — and its messages), or
one JSON document per command (``--output json``). Pure functions of what the admin fetched."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiokafka.structs import TopicPartition

from groupcoord.admin.consumer_groups import (
    Coordinator,
    GroupDescription,
    PartitionRow,
    assignment_string,
    kafka_error,
)

MISSING = "-"

#: states in which Kafka's tool warns that the group is rebalancing
REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})
#: Kafka's consumer-group state names (``GroupState.groupStatesForType(CONSUMER)``)
STATES = ("Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Dead", "Assigning", "Reconciling")


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def columns(widths: Sequence[int], cells: Sequence[object]) -> str:
    """One line of Kafka's ``printf("%-Ws %-Ws ... %s")``: every cell but the last left-aligned
    to its width, one space between (trailing blanks dropped)."""
    texts = [_cell(c) for c in cells]
    padded = [t.ljust(w) for t, w in zip(texts[:-1], widths, strict=True)] + texts[-1:]
    return " ".join(padded).rstrip()


def column_width(minimum: int, values: Iterable[object]) -> int:
    return max([minimum, *(len(_cell(v)) for v in values)])


def group_notice(group: GroupDescription) -> str | None:
    """Kafka's line about a group that is not Stable (None for a Stable one)."""
    if group.state == "Empty":
        return f"Consumer group '{group.group_id}' has no active members."
    if group.state in REBALANCING:
        return f"Warning: Consumer group '{group.group_id}' is rebalancing."
    return None


OFFSETS_HEADER = (
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


def offsets_table(rows: Sequence[PartitionRow], *, verbose: bool = False) -> str:
    """``--describe [--offsets] [--verbose]``: a row per partition (LEADER-EPOCH, verbose only,
    is the leader epoch the committed offset was committed with, ``-`` where none was)."""
    g = column_width(15, (r.group for r in rows))
    t = column_width(15, (r.topic for r in rows))
    c = column_width(15, (r.consumer_id for r in rows))
    h = column_width(15, (r.host for r in rows))
    header: tuple[str, ...] = OFFSETS_HEADER
    widths = [g, t, 10, 15, 15, 15, c, h]
    if verbose:
        header = (*OFFSETS_HEADER[:3], "LEADER-EPOCH", *OFFSETS_HEADER[3:])
        widths = [g, t, 10, 15, 15, 15, 15, c, h]
    lines = [columns(widths, header)]
    for r in rows:
        cells: list[object] = [r.group, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag]
        if verbose:
            cells.insert(3, r.leader_epoch)
        lines.append(columns(widths, [*cells, r.consumer_id, r.host, r.client_id]))
    return "\n".join(lines)


def members_table(group: GroupDescription, *, verbose: bool = False) -> str:
    """``--describe --members [--verbose]``: a row per member, GROUP-INSTANCE-ID when a member
    has one; verbose adds the epochs and the current and target assignments (KIP-848's: ``-``
    in a classic group, as Kafka prints them)."""
    members = group.members
    with_instance = any(m.group_instance_id for m in members)
    widths = [
        column_width(15, [group.group_id]),
        column_width(15, (m.member_id for m in members)),
        *([column_width(17, (m.group_instance_id or "" for m in members))] if with_instance else []),
        column_width(15, (m.host for m in members)),
        column_width(15, (m.client_id for m in members)),
    ]
    header: list[str] = [
        "GROUP",
        "CONSUMER-ID",
        *(["GROUP-INSTANCE-ID"] if with_instance else []),
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
    ]
    assignments = [assignment_string(m.assignment) for m in members]
    if verbose:
        header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        widths += [15, 15, column_width(20, assignments), 15]
    lines = [columns(widths, header)]
    for m, assignment in zip(members, assignments, strict=True):
        instance = [m.group_instance_id or ""] if with_instance else []
        cells: list[object] = [group.group_id, m.member_id, *instance, m.host, m.client_id, len(m.assignment)]
        if verbose:
            target = assignment_string(m.target_assignment) if m.target_assignment is not None else None
            cells += [m.member_epoch, assignment, group.target_assignment_epoch, target]
        lines.append(columns(widths, cells))
    return "\n".join(lines)


def state_table(group: GroupDescription, coordinator: Coordinator, *, verbose: bool = False) -> str:
    """``--describe --state [--verbose]``: the group's coordinator, assignment strategy, state
    and number of members."""
    where = f"{coordinator.host}:{coordinator.port}  ({coordinator.node_id})"
    widths = [max(15, len(group.group_id)), max(25, len(where)), 20, 20]
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    cells: list[object] = [group.group_id, where, group.protocol or None, group.state]
    if verbose:
        header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        widths += [15, 25]
        cells += [group.group_epoch, group.target_assignment_epoch]
    return "\n".join([columns(widths, [*header, "#MEMBERS"]), columns(widths, [*cells, len(group.members)])])


def list_table(groups: Sequence[GroupDescription], *, types: bool = False, states: bool = True) -> str:
    """``--list --state`` / ``--type``: GROUP, then TYPE (Classic or Consumer) and STATE."""
    width = max([15, *(len(g.group_id) for g in groups)]) + 10
    header = ["GROUP", *(["TYPE"] if types else []), *(["STATE"] if states else [])]
    rows = [[g.group_id, *([g.group_type] if types else []), *([g.state] if states else [])] for g in groups]
    return "\n".join(columns([width, 20][: len(header) - 1], row) for row in [header, *rows])


def reset_table(plans: Mapping[str, Mapping[TopicPartition, int]]) -> str:
    """``--reset-offsets``: GROUP TOPIC PARTITION NEW-OFFSET (nothing when no group was reset)."""
    if not plans:
        return ""
    g = column_width(15, plans)
    t = column_width(15, (tp.topic for plan in plans.values() for tp in plan))
    widths = [g, t, 10]
    lines = [columns(widths, ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))]
    for group, plan in plans.items():
        lines += [columns(widths, (group, tp.topic, tp.partition, offset)) for tp, offset in plan.items()]
    return "\n".join(lines)


#: the top-level OffsetDelete errors Kafka's tool reports by their own message
_GROUP_LEVEL = frozenset({24, 69, 30, 68})
_PARTITION_LEVEL = frozenset({86, 29, 3})


def delete_offsets_summary(group: str, error: int, error_name: str) -> str:
    """The first line of ``--delete-offsets``."""
    if error == 0:
        return f"Request succeeded for deleting offsets from group {group}."
    if error in _GROUP_LEVEL:
        return f"Error: {kafka_error(error).split(': ', 1)[1]}"
    if error in _PARTITION_LEVEL:
        return "Error: Encountered some partition-level error, see the follow-up details."
    return f"Error: Encountered some unknown error: {error_name}"


def delete_offsets_table(results: Mapping[TopicPartition, int]) -> str:
    """TOPIC PARTITION STATUS of every partition (partition -1: a topic that does not exist)."""
    t = column_width(15, (tp.topic for tp in results))
    widths = [t, 10]
    lines = [columns(widths, ("TOPIC", "PARTITION", "STATUS"))]
    for tp, code in sorted(results.items(), key=lambda item: item[0].topic + str(item[0].partition)):
        status = "Successful" if code == 0 else f"Error: {kafka_error(code)}"
        lines.append(columns(widths, (tp.topic, tp.partition if tp.partition >= 0 else None, status)))
    return "\n".join(lines)


# --output json: one document per command, the same facts as the tables


def offsets_json(rows: Sequence[PartitionRow]) -> list[dict[str, Any]]:
    return [
        {
            "topic": r.topic,
            "partition": r.partition,
            "current_offset": r.current_offset,
            "log_end_offset": r.log_end_offset,
            "lag": r.lag,
            "consumer_id": r.consumer_id,
            "host": r.host,
            "client_id": r.client_id,
        }
        for r in rows
    ]


def members_json(group: GroupDescription) -> list[dict[str, Any]]:
    return [
        {
            "consumer_id": m.member_id,
            "host": m.host,
            "client_id": m.client_id,
            "partitions": len(m.assignment),
            "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
            "member_epoch": m.member_epoch,
            "target_assignment": None
            if m.target_assignment is None
            else [{"topic": tp.topic, "partition": tp.partition} for tp in m.target_assignment],
        }
        for m in group.members
    ]


def group_json(group: GroupDescription) -> dict[str, Any]:
    return {
        "group": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "type": group.group_type,
        "assignment_strategy": group.protocol or None,
        "members": len(group.members),
        "group_epoch": group.group_epoch,
        "target_assignment_epoch": group.target_assignment_epoch,
    }


def upstream_line(upstream: Mapping[str, Any]) -> str:
    """``describe --upstream``'s line: the group on the upstream's own coordinator."""
    pending = upstream.get("pending_transactional") or 0
    return (
        f"UPSTREAM {upstream['bootstrap']}: {upstream['state']}, {upstream['members']} member(s), "
        f"{upstream['offsets']} committed offset(s)"
        + (f", {pending} pending in a transaction" if pending else "")
        + f"; adoption: {upstream['adoption']}"
    )


def plan_json(plan: Mapping[TopicPartition, int]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition, "offset": o} for tp, o in plan.items()]


def document(value: Any) -> str:
    """The one JSON document a command prints with ``--output json``."""
    return json.dumps(value, indent=2, sort_keys=False)
