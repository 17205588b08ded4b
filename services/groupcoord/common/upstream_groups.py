"""A group as another Kafka coordinator holds it: its state, live members and committed offsets.

groupcoord adopts groups from the upstream cluster's own coordinator (the gateway, on the first
touch of a group it never held: ``gateway/groups/adoption.py``) and moves offsets between the two
(``groupcoord groups import`` and ``export``). Both read a group the way Kafka's admin client
does: FindCoordinator for the group, then DescribeGroups (classic groups; a KIP-848 group is
"Dead" there before v6) and ConsumerGroupDescribe where the cluster has KIP-848, and OffsetFetch
with ``require_stable``, so an offset still pending in an open transaction on the upstream is
reported as unstable (UNSTABLE_OFFSET_COMMIT) and never taken as committed.

Who asks decides whose rights these reads use: the gateway asks with the coordinator's own
upstream identity, the CLI with the operator's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup
from kio.schema.types import GroupId
from kio.static.primitive import i8

from groupcoord.common.kafka_wire.api_keys import ApiKey

Address = tuple[str, int]
Ask = Callable[[Address | None, Any], Awaitable[Any]]
"""``ask(address, body)``: the response of the broker at ``address`` (None: any live broker)."""

INACTIVE_STATES = frozenset({"Empty", "Dead"})
# The requests read_group sends, at the versions it sends them (kio's module versions above).
SENT_VERSIONS = {
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.OFFSET_FETCH: 8,  # the multi-group form: tansu 0.6 answers v1-7 for all topics undecodably
}
_RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.unstable_offset_commit,
    }
)


class UpstreamGroupError(Exception):
    """The cluster refused to tell (``code``): not authorized, or not now (``retriable``)."""

    def __init__(self, group_id: str, code: ErrorCode, what: str) -> None:
        super().__init__(f"group {group_id!r}: {what}: {code.name.upper()}")
        self.code = code

    @property
    def retriable(self) -> bool:
        return self.code in _RETRIABLE


@dataclass(frozen=True, slots=True)
class UpstreamOffset:
    """One partition's committed offset as the cluster's coordinator answered it (the core's
    ``CommittedOffset`` is the one held here)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1 = unknown
    metadata: str


@dataclass(frozen=True, slots=True)
class UpstreamGroup:
    """What the cluster's coordinator holds of a group. ``state`` is Kafka's state name (a
    classic group's or a consumer group's; "Dead": no such group); ``members`` counts the live
    ones; ``unstable`` lists the partitions whose offset is pending in an open transaction
    (left out of ``offsets``)."""

    group_id: str
    state: str
    members: int
    offsets: tuple[UpstreamOffset, ...]
    unstable: tuple[tuple[str, int], ...] = ()

    @property
    def live(self) -> bool:
        """Whether the cluster's coordinator still serves members of it."""
        return self.members > 0 or self.state not in INACTIVE_STATES


def unreadable(versions: Mapping[int, tuple[int, int]]) -> str | None:
    """Why a cluster serving ``versions`` (ApiVersions) cannot be read here, or None."""
    for key, version in SENT_VERSIONS.items():
        low, high = versions.get(key, (0, -1))
        if not low <= version <= high:
            return f"it does not serve {key.name} v{version}"
    return None


@dataclass(frozen=True, slots=True)
class Features:
    """The features (KIP-584) a broker's ApiVersions names: each supported feature's range of
    levels, and the levels the cluster finalized (under ``finalized_epoch``)."""

    supported: Mapping[str, tuple[int, int]]
    finalized: Mapping[str, tuple[int, int]]
    finalized_epoch: int = -1


NO_FEATURES = Features({}, {})


async def api_versions_and_features(
    ask: Ask, software_name: str = "groupcoord", software_version: str = "0.1.0"
) -> tuple[dict[int, tuple[int, int]], Features]:
    """The API versions a broker of the cluster ``ask`` reaches serves, and its features
    (ApiVersions v3)."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: PLC0415

    body = await ask(
        None, ApiVersionsRequest(client_software_name=software_name, client_software_version=software_version)
    )
    versions = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in body.api_keys}
    features = Features(
        supported={f.name: (int(f.min_version), int(f.max_version)) for f in body.supported_features},
        finalized={f.name: (int(f.min_version_level), int(f.max_version_level)) for f in body.finalized_features},
        finalized_epoch=int(body.finalized_features_epoch),
    )
    return versions, features


async def api_versions(ask: Ask, software_name: str = "groupcoord", software_version: str = "0.1.0") -> dict[int, tuple[int, int]]:
    """The API versions a broker of the cluster ``ask`` reaches serves (ApiVersions)."""
    return (await api_versions_and_features(ask, software_name, software_version))[0]


def serves_kip848(versions: Mapping[int, tuple[int, int]]) -> bool:
    return ApiKey.CONSUMER_GROUP_DESCRIBE in versions


GROUP_KEY, TRANSACTION_KEY = 0, 1
"""FindCoordinator's key types."""


async def coordinator_of(ask: Ask, key: str, key_type: int = GROUP_KEY) -> Address:
    """The broker coordinating group ``key`` (or the transactional id ``key``, with
    ``TRANSACTION_KEY``) on the cluster ``ask`` reaches."""
    found = await ask(None, FindCoordinatorRequest(key=key, key_type=i8(key_type)))
    if found.error_code != ErrorCode.none:
        raise UpstreamGroupError(key, found.error_code, "FindCoordinator")
    return str(found.host), int(found.port)


async def membership(ask: Ask, coordinator: Address, group_id: str, *, kip848: bool) -> tuple[str, int]:
    """(state, live members) of ``group_id`` at its coordinator; ``kip848``: the cluster
    serves ConsumerGroupDescribe (asked only when DescribeGroups knows no classic group)."""
    described = await ask(
        coordinator, DescribeGroupsRequest(groups=(GroupId(group_id),), include_authorized_operations=False)
    )
    (group,) = described.groups
    if group.error_code not in (ErrorCode.none, ErrorCode.group_id_not_found):
        raise UpstreamGroupError(group_id, group.error_code, "DescribeGroups")
    if group.error_code == ErrorCode.none and group.group_state != "Dead":
        return str(group.group_state), len(group.members)
    if not kip848:
        return "Dead", 0
    described = await ask(
        coordinator,
        ConsumerGroupDescribeRequest(group_ids=(GroupId(group_id),), include_authorized_operations=False),
    )
    (group,) = described.groups
    if group.error_code == ErrorCode.group_id_not_found:
        return "Dead", 0
    if group.error_code != ErrorCode.none:
        raise UpstreamGroupError(group_id, group.error_code, "ConsumerGroupDescribe")
    return str(group.group_state), len(group.members)


async def committed_offsets(
    ask: Ask, coordinator: Address, group_id: str
) -> tuple[tuple[UpstreamOffset, ...], tuple[tuple[str, int], ...]]:
    """(stable committed offsets, partitions pending in an open transaction) of ``group_id``."""
    response = await ask(
        coordinator,
        OffsetFetchRequest(
            groups=(OffsetFetchRequestGroup(group_id=GroupId(group_id), topics=None),), require_stable=True
        ),
    )
    (fetched,) = response.groups
    if fetched.error_code not in (ErrorCode.none, ErrorCode.unstable_offset_commit):
        raise UpstreamGroupError(group_id, fetched.error_code, "OffsetFetch")
    offsets: list[UpstreamOffset] = []
    unstable: list[tuple[str, int]] = []
    for topic in fetched.topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.unstable_offset_commit:
                unstable.append((str(topic.name), int(p.partition_index)))
            elif p.error_code != ErrorCode.none:
                raise UpstreamGroupError(
                    group_id, p.error_code, f"OffsetFetch of {topic.name}-{p.partition_index}"
                )
            elif p.committed_offset >= 0:
                offsets.append(
                    UpstreamOffset(
                        str(topic.name),
                        int(p.partition_index),
                        int(p.committed_offset),
                        int(p.committed_leader_epoch),
                        p.metadata or "",
                    )
                )
    if fetched.error_code == ErrorCode.unstable_offset_commit and not unstable:
        unstable.append(("", -1))  # the whole group: some partition is pending, not said which
    return tuple(offsets), tuple(unstable)


async def read_group(ask: Ask, group_id: str, *, kip848: bool) -> UpstreamGroup:
    """``group_id`` as the coordinator of the cluster ``ask`` reaches holds it."""
    coordinator = await coordinator_of(ask, group_id)
    state, members = await membership(ask, coordinator, group_id, kip848=kip848)
    offsets, unstable = await committed_offsets(ask, coordinator, group_id)
    return UpstreamGroup(group_id, state, members, offsets, unstable)
