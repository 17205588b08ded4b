"""Share-group administration over the Kafka protocol, as ``kafka-share-groups.sh`` does it.

Through the gateway's Kafka listener, secured by ``--command-config`` like ``groupcoord groups``:
ListGroups (aiokafka) names the share groups, ShareGroupDescribe gives their state, epochs and
members, DescribeShareGroupOffsets their start offsets and lag (KIP-1226: computed by the
coordinator from the log end), both kio requests over :mod:`groupcoord.common.kafka_wire` at
the group's coordinator. The tables are pure functions of what was fetched, with the column
names, widths and messages of Kafka 4.4's ``ShareGroupCommand``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.structs import TopicPartition
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.delete_share_group_offsets.v0.request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.static.primitive import i32, i64

from groupcoord.admin.consumer_groups import AdminError, ConsumerGroupsAdmin, Coordinator, kafka_error
from groupcoord.admin.output import column_width, columns
from groupcoord.common.kafka_wire.exchange import exchange

#: Kafka's share-group state names (``GroupState.groupStatesForType(SHARE)``)
STATES = ("Stable", "Empty", "Dead")


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[tuple[str, int], ...]  # (topic, partition), sorted


@dataclass(frozen=True, slots=True)
class ShareGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...]


@dataclass(frozen=True, slots=True)
class StartOffset:
    """One share-partition's row of ``--describe --offsets``: None prints as ``-``."""

    topic: str
    partition: int
    start_offset: int | None
    leader_epoch: int | None
    lag: int | None


def share_group(described: Any) -> ShareGroup:
    """A ShareGroupDescribe group (kio) as the tables need it."""
    return ShareGroup(
        group_id=described.group_id,
        state=described.group_state,
        group_epoch=int(described.group_epoch),
        assignment_epoch=int(described.assignment_epoch),
        members=tuple(
            ShareMember(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.client_host,
                member_epoch=int(m.member_epoch),
                assignment=tuple(
                    sorted(
                        (tp.topic_name, int(p)) for tp in m.assignment.topic_partitions for p in tp.partitions
                    )
                ),
            )
            for m in described.members
        ),
    )


def start_offsets(group: Any) -> list[StartOffset]:
    """A DescribeShareGroupOffsets group (kio) as rows, sorted by topic and partition."""
    return sorted(
        (
            StartOffset(
                topic=t.topic_name,
                partition=int(p.partition_index),
                start_offset=int(p.start_offset) if p.start_offset >= 0 else None,
                leader_epoch=int(p.leader_epoch) if p.leader_epoch >= 0 else None,
                lag=int(p.lag) if p.lag >= 0 else None,
            )
            for t in group.topics
            for p in t.partitions
        ),
        key=lambda row: (row.topic, row.partition),
    )


def failed(code: int, message: str | None) -> AdminError:
    """Kafka's tool's line for a failed call: ``Executing share group command failed due to
    org.apache.kafka.common.errors.GroupIdNotFoundException: Group g not found.``"""
    text = kafka_error(code)
    if message:
        text = f"{text.split(': ', 1)[0]}: {message}"
    return AdminError(f"Executing share group command failed due to {text}", code)


def error_message(code: int, message: str | None = None) -> str:
    """A Kafka error as Kafka's tool names it in a table cell: its message alone."""
    return message or kafka_error(code).split(": ", 1)[1]


def delete_offsets_table(results: Mapping[str, tuple[int, str | None]]) -> str:
    """``--delete-offsets``: TOPIC STATUS per topic (share-group offsets go by topic), sorted."""
    widths = [column_width(15, results)]
    lines = [columns(widths, ("TOPIC", "STATUS"))]
    for topic, (code, message) in sorted(results.items()):
        lines.append(columns(widths, (topic, "Successful" if code == 0 else f"Error: {error_message(code, message)}")))
    return "\n".join(lines)


def assignment_text(assignment: Sequence[tuple[str, int]]) -> str:
    """``audit:0,1;orders:0,1``: topics in order, each with its partitions."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(str(p) for p in ps)}" for t, ps in by_topic.items())


def list_table(groups: Sequence[ShareGroup]) -> str:
    width = column_width(15, [g.group_id for g in groups])
    return "\n".join(columns([width], cells) for cells in [("GROUP", "STATE"), *((g.group_id, g.state) for g in groups)])


def offsets_table(group_id: str, rows: Sequence[StartOffset], *, verbose: bool = False) -> str:
    widths = [column_width(15, [group_id]), column_width(15, [r.topic for r in rows]), 10]
    head: list[object] = ["GROUP", "TOPIC", "PARTITION"]
    if verbose:
        widths.append(13)
        head.append("LEADER-EPOCH")
    widths.append(13)
    head += ["START-OFFSET", "LAG"]
    lines = [columns(widths, head)]
    for r in rows:
        cells: list[object] = [group_id, r.topic, r.partition]
        if verbose:
            cells.append(r.leader_epoch)
        lines.append(columns(widths, [*cells, r.start_offset, r.lag]))
    return "\n".join(lines)


def members_table(group: ShareGroup, *, verbose: bool = False) -> str:
    members = sorted(group.members, key=lambda m: m.member_id)
    widths = [
        column_width(15, [group.group_id]),
        column_width(15, [m.member_id for m in members]),
        column_width(15, [m.host for m in members]),
        column_width(15, [m.client_id for m in members]),
        12,
    ]
    head: list[object] = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        widths.append(13)
        head.append("MEMBER-EPOCH")
    lines = [columns(widths, [*head, "ASSIGNMENT"])]
    for m in members:
        cells: list[object] = [group.group_id, m.member_id, m.host, m.client_id, len(m.assignment)]
        if verbose:
            cells.append(m.member_epoch)
        lines.append(columns(widths, [*cells, assignment_text(m.assignment)]))
    return "\n".join(lines)


def state_table(group: ShareGroup, coordinator: Coordinator, *, verbose: bool = False) -> str:
    where = f"{coordinator.host}:{coordinator.port}  ({coordinator.node_id})"
    widths = [column_width(15, [group.group_id]), column_width(25, [where]), column_width(15, [group.state])]
    head: list[object] = ["GROUP", "COORDINATOR (ID)", "STATE"]
    cells: list[object] = [group.group_id, where, group.state]
    if verbose:
        widths += [12, 17]
        head += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        cells += [group.group_epoch, group.assignment_epoch]
    return "\n".join([columns(widths, [*head, "#MEMBERS"]), columns(widths, [*cells, len(group.members)])])


class ShareGroupsAdmin(ConsumerGroupsAdmin):
    """The share-group calls, on the connections :class:`ConsumerGroupsAdmin` opens."""

    async def list_share_groups(self) -> list[str]:
        return sorted(str(g[0]) for g in await self.admin.list_consumer_groups() if str(g[1]) == "share")

    async def describe_share_groups(self, group_ids: Sequence[str]) -> list[ShareGroup]:
        """Each group (ShareGroupDescribe at its coordinator); a group that does not exist, or
        is not a share group, raises Kafka's error as ``AdminError``."""
        out = []
        for group_id in group_ids:
            response = await self._at_coordinator(
                group_id, ShareGroupDescribeRequest(group_ids=(group_id,), include_authorized_operations=False)
            )
            described = response.groups[0]
            if described.error_code.value != 0:
                raise failed(described.error_code.value, described.error_message)
            out.append(share_group(described))
        return out

    async def share_start_offsets(self, group_id: str) -> list[StartOffset]:
        """Every share-partition of the group (DescribeShareGroupOffsets, all topics)."""
        response = await self._at_coordinator(
            group_id,
            DescribeShareGroupOffsetsRequest(groups=(DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None),)),
        )
        group = response.groups[0]
        if group.error_code.value != 0:
            raise failed(group.error_code.value, group.error_message)
        return start_offsets(group)

    async def alter_share_offsets(self, group_id: str, plan: Mapping[TopicPartition, int]) -> tuple[int, str | None]:
        """AlterShareGroupOffsets (the group must be empty): the first error, if any (code, message)."""
        by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
        for tp, offset in sorted(plan.items()):
            by_topic.setdefault(tp.topic, []).append(
                AlterShareGroupOffsetsRequestPartition(partition_index=i32(tp.partition), start_offset=i64(offset))
            )
        response = await self._at_coordinator(
            group_id,
            AlterShareGroupOffsetsRequest(
                group_id=group_id,
                topics=tuple(AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            ),
        )
        if response.error_code.value:
            return response.error_code.value, response.error_message
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code.value:
                    return p.error_code.value, p.error_message
        return 0, None

    async def delete_share_offsets(
        self, group_id: str, topics: Sequence[str]
    ) -> tuple[tuple[int, str | None], dict[str, tuple[int, str | None]]]:
        """DeleteShareGroupOffsets of whole topics: the request's error and each topic's."""
        response = await self._at_coordinator(
            group_id,
            DeleteShareGroupOffsetsRequest(
                group_id=group_id, topics=tuple(DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics)
            ),
        )
        return (response.error_code.value, response.error_message), {
            t.topic_name: (t.error_code.value, t.error_message) for t in response.responses
        }

    async def _at_coordinator(self, group_id: str, request: Any) -> Any:
        where = await self.coordinator(group_id)
        return await exchange((where.host, where.port), request, self.client_id, self.timeout_s, self.security)
