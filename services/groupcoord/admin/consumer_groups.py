"""Consumer-group administration over the Kafka protocol, as ``kafka-consumer-groups.sh`` does it.

Everything goes through the gateway's Kafka listener with aiokafka (ListGroups, DescribeGroups,
OffsetFetch, ListOffsets and Fetch high watermarks, an admin OffsetCommit, DeleteGroups) and,
for what aiokafka lacks, kio requests over :mod:`groupcoord.common.kafka_wire`
(ConsumerGroupDescribe, OffsetFetch v7 for leader epochs, OffsetDelete), all secured alike by
``--command-config`` (:mod:`groupcoord.admin.client_config`), so the same commands work
against ``groupcoord up`` and a Kubernetes deployment, plaintext or TLS/SASL. The decisions are
pure functions (:func:`describe_rows`, :func:`reset_plan`, :func:`check_inactive`,
:func:`parse_reset_file`, :func:`export_csv`...); :class:`ConsumerGroupsAdmin` only fetches what
they need and applies what they decide.

Kafka's safety rule is kept: offsets are reset only while the group is inactive (Empty or
Dead). The coordinator enforces it too — an admin commit to a group with members is refused
with UNKNOWN_MEMBER_ID — but checking first gives the operator Kafka's message instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import for_code
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.errors import ErrorCode
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest
from kio.static.primitive import i32

from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.kafka_wire.exchange import ExchangeFailed, exchange
from groupcoord.observability.consumer_lag import LogEndOffsets

INACTIVE_STATES = frozenset({"Empty", "Dead"})


class AdminError(Exception):
    """A refusal or failure to print as one line (Kafka's wording where Kafka has one);
    ``code``: the Kafka error code behind it, when a response gave one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()
    # KIP-848 members only (ConsumerGroupDescribe): None in a classic group
    member_epoch: int | None = None
    target_assignment: tuple[TopicPartition, ...] | None = None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str  # Kafka's state names: Empty, Stable, PreparingRebalance, ..., Dead
    protocol_type: str
    members: tuple[Member, ...] = ()
    protocol: str = ""  # the assignment strategy ("range", "uniform"...), "" while there is none
    # KIP-848 groups only (ConsumerGroupDescribe): None in a classic group
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None

    @property
    def exists(self) -> bool:
        return self.state != "Dead"

    @property
    def group_type(self) -> str:
        """Kafka's ``GroupType``: Consumer for a KIP-848 group, Classic otherwise."""
        return "Consumer" if self.group_epoch is not None else "Classic"


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """One line of ``describe``: Kafka's GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
    CONSUMER-ID HOST CLIENT-ID (``None`` prints as ``-``)."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None = None
    host: str | None = None
    client_id: str | None = None
    leader_epoch: int | None = None  # of the committed offset (--verbose's LEADER-EPOCH)


def describe_rows(
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    end_offsets: Mapping[TopicPartition, int],
    leader_epochs: Mapping[TopicPartition, int] | None = None,
) -> list[PartitionRow]:
    """Every partition the group is assigned or has committed, with its lag (as
    ``kafka-consumer-groups --describe``: assigned partitions without a commit show no lag), in
    Kafka's order: the members with the most partitions first, each member's partitions sorted,
    then the committed partitions no member owns."""
    owner = {tp: m for m in group.members for tp in m.assignment}
    members = sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment))
    order = [tp for m in members for tp in sorted(m.assignment)]
    order += sorted(set(committed) - set(owner))
    rows = []
    for tp in order:
        current = committed.get(tp)
        end = end_offsets.get(tp)
        lag = max(0, end - current) if current is not None and end is not None else None
        m = owner.get(tp)
        rows.append(
            PartitionRow(
                group.group_id,
                tp.topic,
                tp.partition,
                current,
                end,
                lag,
                m.member_id if m else None,
                m.host if m else None,
                m.client_id if m else None,
                (leader_epochs or {}).get(tp) if current is not None else None,
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class ResetSpec:
    """Which offsets to move to: exactly one scenario, as ``kafka-consumer-groups``
    (``--by-duration`` arrives as the ``to_datetime`` it means; ``--from-file`` as the file's
    offsets for the group)."""

    to_earliest: bool = False
    to_latest: bool = False
    to_datetime: datetime | None = None
    shift_by: int | None = None
    to_offset: int | None = None
    to_current: bool = False
    from_file: Mapping[TopicPartition, int] | None = None

    def __post_init__(self) -> None:
        chosen = [
            self.to_earliest,
            self.to_latest,
            self.to_datetime is not None,
            self.shift_by is not None,
            self.to_offset is not None,
            self.to_current,
            self.from_file is not None,
        ]
        if sum(chosen) != 1:
            raise AdminError(
                "Option reset-offsets needs exactly one of --to-earliest, --to-latest, "
                "--to-datetime, --by-duration, --shift-by, --to-offset, --to-current, --from-file"
            )


@dataclass(frozen=True, slots=True)
class OffsetBounds:
    """What the upstream says about each partition: log start, log end, and (for
    ``--to-datetime``) the first offset at or after the timestamp (``None``: none yet)."""

    earliest: Mapping[TopicPartition, int]
    latest: Mapping[TopicPartition, int]
    by_time: Mapping[TopicPartition, int | None] = field(default_factory=dict)


def reset_plan(
    spec: ResetSpec,
    partitions: Iterable[TopicPartition],
    committed: Mapping[TopicPartition, int],
    bounds: OffsetBounds,
) -> dict[TopicPartition, int]:
    """The new offset of every partition, clamped to the log as Kafka's tool does (a shift past
    either end lands on that end; a time after the last record means the log end). Shifting a
    partition the group never committed is refused, as ``resetByShiftBy`` refuses it;
    ``--to-current`` keeps the committed offset (the log end where there is none) unclamped, as
    ``resetToCurrent`` does."""
    plan: dict[TopicPartition, int] = {}
    for tp in sorted(partitions):
        low, high = bounds.earliest[tp], bounds.latest[tp]
        if spec.to_current:
            plan[tp] = committed.get(tp, high)
            continue
        if spec.to_offset is not None:
            target = spec.to_offset
        elif spec.from_file is not None:
            target = spec.from_file[tp]
        elif spec.to_earliest:
            target = low
        elif spec.to_latest:
            target = high
        elif spec.to_datetime is not None:
            at = bounds.by_time.get(tp)
            target = high if at is None else at
        else:
            assert spec.shift_by is not None
            if tp not in committed:
                raise AdminError(
                    f"Cannot shift offset for partition {tp.topic}-{tp.partition} "
                    "since there is no current committed offset"
                )
            target = committed[tp] + spec.shift_by
        plan[tp] = min(max(target, low), high)
    return plan


def check_inactive(group: GroupDescription) -> None:
    """Kafka's rule (``ConsumerGroupCommand.resetOffsets``): no reset while the group has members."""
    if group.state not in INACTIVE_STATES:
        raise AdminError(
            f"Assignments can only be reset if the group '{group.group_id}' is inactive, "
            f"but the current state is {group.state}."
        )


def parse_topic_partitions(spec: str, partition_counts: Mapping[str, int]) -> list[TopicPartition]:
    """``topic`` (all its partitions) or ``topic:0,2`` (those), as ``--topic`` of Kafka's tool."""
    topic, _, listed = spec.partition(":")
    count = partition_counts.get(topic)
    if count is None:
        raise AdminError(f"Topic '{topic}' does not exist")
    if not listed:
        return [TopicPartition(topic, p) for p in range(count)]
    try:
        chosen = sorted({int(p) for p in listed.split(",")})
    except ValueError:
        raise AdminError(f"--topic {spec!r}: partitions must be integers, e.g. {topic}:0,1") from None
    missing = [p for p in chosen if not 0 <= p < count]
    if missing:
        raise AdminError(f"Topic '{topic}' has {count} partitions; no partition {missing[0]}")
    return [TopicPartition(topic, p) for p in chosen]


def check_partitions_exist(partitions: Iterable[TopicPartition], partition_counts: Mapping[str, int]) -> None:
    """Kafka's ``checkAllTopicPartitionsValid``: every partition to reset exists."""
    missing = [tp for tp in partitions if not 0 <= tp.partition < partition_counts.get(tp.topic, 0)]
    if missing:
        named = ",".join(f"{tp.topic}-{tp.partition}" for tp in missing)
        raise AdminError(f'The partitions "{named}" do not exist')


_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+)D)?"
    r"(?:T(?:(?P<h>[-+]?\d+)H)?(?:(?P<m>[-+]?\d+)M)?(?:(?P<s>[-+]?\d+(?:[.,]\d{1,9})?)S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> timedelta:
    """An ISO 8601 duration as Java's ``Duration.parse`` reads it (``PnDTnHnMn.nS``, e.g.
    ``PT2H``, ``P1DT30M``): what ``--by-duration`` takes."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper().endswith("T") or not any(match[k] for k in "dhms"):
        raise AdminError(f"--by-duration {text!r} is not an ISO 8601 duration, e.g. PT2H or P1DT30M")
    seconds = float((match["s"] or "0").replace(",", "."))
    duration = timedelta(
        days=int(match["d"] or 0), hours=int(match["h"] or 0), minutes=int(match["m"] or 0), seconds=seconds
    )
    return -duration if match["sign"] == "-" else duration


def parse_reset_file(text: str, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    """A ``--from-file`` plan: Kafka's CSV, ``topic,partition,offset`` when one group is named
    (the lines are that group's) or ``group,topic,partition,offset``: group -> partition -> offset."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]

    def number(cell: str, line: str) -> int:
        try:
            return int(cell)
        except ValueError:
            raise AdminError(
                f"--from-file: {line!r} is not topic,partition,offset or group,topic,partition,offset"
            ) from None

    three = bool(lines) and len(lines[0].split(",")) == 3
    plan: dict[str, dict[TopicPartition, int]] = {}
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if three and len(groups) == 1 and len(cells) == 3:
            group, (topic, partition, offset) = groups[0], cells
        elif len(cells) == 4:
            group, topic, partition, offset = cells
        else:
            raise AdminError(
                f"--from-file: {line!r} is not topic,partition,offset or group,topic,partition,offset"
            )
        plan.setdefault(group, {})[TopicPartition(topic, number(partition, line))] = number(offset, line)
    return plan


def export_csv(plans: Mapping[str, Mapping[TopicPartition, int]], *, with_group: bool) -> str:
    """``--export``: the plan as Kafka writes it (``topic,partition,offset`` per line, the group
    first when more than one group was asked for), readable back by ``--from-file``."""
    lines = []
    for group, plan in plans.items():
        for tp, offset in plan.items():
            cells = (
                (group, tp.topic, tp.partition, offset) if with_group else (tp.topic, tp.partition, offset)
            )
            lines.append(",".join(str(c) for c in cells))
    return "".join(f"{line}\n" for line in lines)


def assignment_string(partitions: Iterable[TopicPartition]) -> str:
    """``topic:0,1,2;other:0`` as ``--describe --members --verbose`` prints an assignment."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    text = ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items()))
    return text or "-"


def parse_datetime(text: str) -> datetime:
    """ISO 8601 (``2026-11-24T08:00:00``, ``...Z``, ``...+01:00``); no zone means UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise AdminError(f"--to-datetime {text!r} is not ISO 8601, e.g. 2026-11-24T08:00:00Z") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _group_description(raw: tuple) -> GroupDescription:
    error_code, group_id, state, protocol_type, protocol, members = raw[:6]
    if error_code and error_code != 69:  # GROUP_ID_NOT_FOUND describes a group that does not exist
        raise for_code(error_code)(f"DescribeGroups {group_id}")
    if error_code:
        state = "Dead"
    out = []
    for member in members:
        member_id, client_id, host = member[0], member[1], member[2]
        raw_assignment = member[-1]
        assignment: tuple[TopicPartition, ...] = ()
        if protocol_type == "consumer" and raw_assignment:
            decoded = ConsumerProtocolMemberAssignment.decode(raw_assignment)
            assignment = tuple(sorted(decoded.partitions()))
        out.append(Member(member_id, client_id, host.lstrip("/"), assignment))
    return GroupDescription(group_id, state, protocol_type, tuple(out), protocol or "")


#: Kafka's exception class and message of the error codes the commands print
KAFKA_ERRORS: dict[int, tuple[str, str]] = {
    3: ("UnknownTopicOrPartitionException", "This server does not host this topic-partition."),
    24: ("InvalidGroupIdException", "The configured groupId is invalid."),
    25: ("UnknownMemberIdException", "The coordinator is not aware of this member."),
    29: ("TopicAuthorizationException", "Topic authorization failed."),
    30: ("GroupAuthorizationException", "Group authorization failed."),
    68: ("GroupNotEmptyException", "The group is not empty."),
    69: ("GroupIdNotFoundException", "The group id does not exist."),
    86: (
        "GroupSubscribedToTopicException",
        "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
    ),
}


def kafka_error(code: int) -> str:
    """``org.apache.kafka.common.errors.X: message`` as Kafka's tool prints a failed future."""
    name, message = KAFKA_ERRORS.get(code, ("KafkaException", f"error code {code}"))
    return f"org.apache.kafka.common.errors.{name}: {message}"


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    host: str
    port: int


def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    return tuple(
        sorted(
            TopicPartition(t.topic_name, int(p)) for t in assignment.topic_partitions for p in t.partitions
        )
    )


def consumer_group_description(group: Any) -> GroupDescription:
    """A ConsumerGroupDescribe group (kio's ``DescribedGroup``) as :class:`GroupDescription`."""
    members = tuple(
        Member(
            m.member_id,
            m.client_id,
            m.client_host.lstrip("/"),
            _partitions(m.assignment),
            int(m.member_epoch),
            _partitions(m.target_assignment),
            m.instance_id or None,
        )
        for m in group.members
    )
    return GroupDescription(
        group.group_id,
        group.group_state,
        "consumer",
        members,
        group.assignor_name,
        int(group.group_epoch),
        int(group.assignment_epoch),
    )


class ConsumerGroupsAdmin:
    """An aiokafka admin client and consumer (for ListOffsets) on ``bootstrap``, every
    connection secured as ``security`` says (``--command-config``): use as
    ``async with ConsumerGroupsAdmin(...) as admin``."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "groupcoord-admin",
        timeout_s: float = 30.0,
        security: KafkaSecurity | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.timeout_ms = int(timeout_s * 1000)
        # the gateway's listener, not the upstream: plaintext unless --command-config says
        # otherwise, whatever GROUPCOORD_KAFKA_* the shell has
        self.security = security if security is not None else KafkaSecurity()
        self.admin = AIOKafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            request_timeout_ms=self.timeout_ms,
            **self._options(),
        )
        self.offsets = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            enable_auto_commit=False,
            request_timeout_ms=self.timeout_ms,
            **self._options(),
        )
        self.log_end = LogEndOffsets(bootstrap, self._options())

    def _options(self) -> dict[str, Any]:
        return self.security.aiokafka_options()

    async def __aenter__(self) -> ConsumerGroupsAdmin:
        try:
            await self.admin.start()
            await self.offsets.start()
        except BaseException:
            await self.__aexit__()  # a refused connection (TLS, SASL) leaves nothing open
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        # aiokafka's consumer.stop() can re-raise the CancelledError of its own background
        # task when it stops right after starting; closing must not mask the command's result.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await self.offsets.stop()
        with contextlib.suppress(Exception):
            await self.admin.close()
        with contextlib.suppress(Exception):
            await self.log_end.close()

    async def list_groups(self) -> list[tuple[str, str]]:
        """(group id, protocol type) of every consumer group (classic or KIP-848), sorted: share
        groups are kafka-share-groups.sh's, as Kafka's kafka-consumer-groups.sh leaves them out."""
        return sorted(
            (str(g[0]), str(g[1])) for g in await self.admin.list_consumer_groups() if str(g[1]) != "share"
        )

    async def describe(self, group_ids: list[str]) -> list[GroupDescription]:
        """Each group as Kafka's AdminClient describes it: ConsumerGroupDescribe for a KIP-848
        group (its epochs, target assignment and assignor), DescribeGroups for a classic one."""
        # One group per request: aiokafka 0.14 decodes DescribeGroups v3 responses with the v2
        # schema (no authorized_operations), which misreads every group after the first.
        responses = await asyncio.gather(*(self.admin.describe_consumer_groups([g]) for g in group_ids))
        classic = [_group_description(r[0].groups[0]) for r in responses]
        return list(await asyncio.gather(*(self._kip848(d) for d in classic)))

    async def _kip848(self, group: GroupDescription) -> GroupDescription:
        """``group`` from ConsumerGroupDescribe if it is a KIP-848 group (as is otherwise: a
        classic group is GROUP_ID_NOT_FOUND there, and a coordinator without the API says so)."""
        if group.protocol_type not in ("consumer", ""):
            return group
        try:
            where = await self.coordinator(group.group_id)
            response = await exchange(
                (where.host, where.port),
                ConsumerGroupDescribeRequest(
                    group_ids=(group.group_id,), include_authorized_operations=False
                ),
                self.client_id,
                self.timeout_s,
                self.security,
            )
        except (ExchangeFailed, AdminError):
            return group
        described = [g for g in response.groups if g.group_id == group.group_id and g.error_code == ErrorCode.none]
        return consumer_group_description(described[0]) if described else group

    async def committed(self, group_id: str) -> dict[TopicPartition, int]:
        fetched = await self.admin.list_consumer_group_offsets(group_id)
        return {tp: om.offset for tp, om in fetched.items() if om.offset >= 0}

    async def leader_epochs(self, group_id: str) -> dict[TopicPartition, int]:
        """The leader epoch of each committed offset (OffsetFetch v7, which aiokafka does not
        send): what Kafka's tool prints as LEADER-EPOCH. Best effort: {} if it cannot be had."""
        try:
            where = await self.coordinator(group_id)
            response = await exchange(
                (where.host, where.port),
                OffsetFetchRequest(group_id=group_id, topics=None),
                self.client_id,
                self.timeout_s,
                self.security,
            )
        except (ExchangeFailed, AdminError):
            return {}
        return {
            TopicPartition(t.name, int(p.partition_index)): int(p.committed_leader_epoch)
            for t in response.topics
            for p in t.partitions
            if p.committed_leader_epoch >= 0 and p.committed_offset >= 0
        }

    async def partition_counts(self) -> dict[str, int]:
        cluster = await self.offsets._client.fetch_all_metadata()
        return {t: len(cluster.partitions_for_topic(t) or ()) for t in cluster.topics()}

    async def bounds(self, partitions: list[TopicPartition], at: datetime | None = None) -> OffsetBounds:
        """Log start and end (ListOffsets earliest/latest), and the offsets at a time."""
        if not partitions:
            return OffsetBounds({}, {})
        earliest = await self.offsets.beginning_offsets(partitions)
        # The log end is the high watermark of a Fetch (what Kafka's ListOffsets "latest"
        # answers; the embedded broker's ListOffsets counts batches, not records).
        high = await self.log_end.fetch({(tp.topic, tp.partition): o for tp, o in earliest.items()})
        missing = [tp for tp in partitions if (tp.topic, tp.partition) not in high]
        latest = await self.offsets.end_offsets(missing) if missing else {}
        latest.update({TopicPartition(t, p): o for (t, p), o in high.items()})
        by_time: dict[TopicPartition, int | None] = {}
        if at is not None:
            found = await self.offsets.offsets_for_times(
                {tp: int(at.timestamp() * 1000) for tp in partitions}
            )
            by_time = {tp: (None if v is None or v.timestamp < 0 else v.offset) for tp, v in found.items()}
        return OffsetBounds(earliest, latest, by_time)

    async def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """An admin commit (no member, generation -1), as AdminClient.alterConsumerGroupOffsets."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            client_id=self.client_id,
            group_id=group_id,
            enable_auto_commit=False,
            request_timeout_ms=self.timeout_ms,
            **self._options(),
        )
        await consumer.start()
        try:
            consumer.assign(list(offsets))
            await consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()})
        finally:
            await consumer.stop()

    async def delete(self, group_ids: list[str]) -> dict[str, int]:
        """DeleteGroups at each group's coordinator: group id -> Kafka error code (0 = deleted)."""
        client: AIOKafkaClient = self.admin._client  # the admin client has no DeleteGroups call
        out: dict[str, int] = {}
        for group_id in group_ids:
            node = await self.admin.find_coordinator(group_id)
            response = await client.send(node, DeleteGroupsRequest([group_id]))
            out.update({str(g): int(code) for g, code in response.results})
        return out

    async def coordinator(self, group_id: str) -> Coordinator:
        """The group's coordinator (FindCoordinator): the gateway itself, as it answers."""
        node = await self.admin.find_coordinator(group_id)
        broker = self.admin._client.cluster.broker_metadata(node)
        if broker is None:
            await self.admin._client.force_metadata_update()
            broker = self.admin._client.cluster.broker_metadata(node)
        if broker is None:
            raise AdminError(f"the coordinator of group '{group_id}' (node {node}) is not in the metadata")
        return Coordinator(node, broker.host, broker.port)

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete at the group's coordinator (aiokafka has no call for it: a kio request
        over :mod:`groupcoord.common.kafka_wire`, secured the same way): the top-level error
        code and each partition's."""
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(set(partitions)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = OffsetDeleteRequest(
            group_id=group_id,
            topics=tuple(
                OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=tuple(OffsetDeleteRequestPartition(partition_index=i32(p)) for p in ps),
                )
                for topic, ps in by_topic.items()
            ),
        )
        where = await self.coordinator(group_id)
        response = await exchange(
            (where.host, where.port), request, self.client_id, self.timeout_s, self.security
        )
        codes = {
            TopicPartition(t.name, int(p.partition_index)): int(p.error_code)
            for t in response.topics
            for p in t.partitions
        }
        return int(response.error_code), codes
