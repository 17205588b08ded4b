"""Group administration: ListGroups v0-5, DescribeGroups v0-6, DeleteGroups.

Works on every group type through the ``Group`` protocol (core/group.py); a share group is
listed (protocol type "share") but DescribeGroups does not describe it, as Kafka. Classic groups are
described as Kafka's ``GroupMetadataManager.describeGroups`` does; a consumer (KIP-848) group
as Kafka's ``ConsumerGroup.asDescribedGroup``: protocol type "consumer", the default assignor
as protocol data, each member's subscription and assignment in the embedded consumer protocol
(so tools still using DescribeGroups see consumer groups too).
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.classic.classic_group import ClassicGroup, ClassicGroupState
from groupcoord.coordinator.core.classic.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup
from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.group import Group, GroupType, authorized_operations, not_found_message
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.rpc.v1 import group_admin_pb2 as pb

# DescribeGroups v6+ reports a missing group as GROUP_ID_NOT_FOUND (KIP-1043); older versions
# answer "Dead" with no error.
_GROUP_ID_NOT_FOUND_VERSION = 6


def _protocol_type(group: Group) -> str:
    if isinstance(group, ClassicGroup):
        return group.protocol_type
    if group.group_type in (GroupType.SHARE, GroupType.STREAMS):
        return group.group_type.value
    return "consumer"


class GroupAdmin(ActsOnState):
    """ListGroups, DescribeGroups and DeleteGroups over the partition state's groups.

    ``delete_group_records(group)`` gives a group's tombstones with its offsets' (the shard's);
    ``default_assignor`` is the consumer groups' default assignor (their DescribeGroups
    protocol data)."""

    def __init__(
        self,
        data: GroupCoordinatorState,
        delete_group_records: Callable[[Group], list[CoordinatorRecord]],
        default_assignor: str,
    ) -> None:
        self.data = data
        self._delete_group_records = delete_group_records
        self._default_assignor = default_assignor

    def list_groups(
        self, request: pb.ListGroupsRequest, now_ms: int
    ) -> CoordinatorResult[pb.ListGroupsResponse]:
        """Every group of the partition, filtered by state (v4+) and type (v5+), case-insensitively."""
        states = {s.lower() for s in request.states_filter}
        types = {t.lower() for t in request.types_filter}
        response = pb.ListGroupsResponse()
        for group in self.groups.values():
            state = group.state_name()
            kind = group.group_type.value
            if states and state.lower() not in states:
                continue
            if types and kind not in types:
                continue
            response.groups.add(
                group_id=group.group_id,
                protocol_type=_protocol_type(group),
                group_state=state,
                group_type=kind,
            )
        return CoordinatorResult(response=response)

    def describe_groups(
        self, request: pb.DescribeGroupsRequest, now_ms: int
    ) -> CoordinatorResult[pb.DescribeGroupsResponse]:
        response = pb.DescribeGroupsResponse()
        for group_id in request.groups:
            group = self.groups.get(group_id)
            described = None
            if isinstance(group, ClassicGroup):
                described = _describe_classic(group)
            elif (
                group is not None and hasattr(group, "members") and hasattr(group, "member_subscribed_names")
            ):
                described = self._describe_consumer(group)
            if described is None:  # none, or a share group: Kafka describes only classic ones
                described = pb.DescribedGroup(group_id=group_id, group_state=ClassicGroupState.DEAD.value)
                if request.api_version >= _GROUP_ID_NOT_FOUND_VERSION:
                    described.error_code = ErrorCode.group_id_not_found.value
                    described.error_message = not_found_message(group_id, group, "classic")
            described.authorized_operations = authorized_operations(request.include_authorized_operations)
            response.groups.append(described)
        return CoordinatorResult(response=response)

    def delete_groups(
        self, request: pb.DeleteGroupsRequest, now_ms: int
    ) -> CoordinatorResult[pb.DeleteGroupsResponse]:
        """Delete empty groups and their offsets (NON_EMPTY_GROUP while members remain)."""
        records: list[CoordinatorRecord] = []
        response = pb.DeleteGroupsResponse()
        for group_id in request.groups_names:
            code = ErrorCode.none
            group = self.groups.get(group_id)
            if group is None:  # the empty name too: Kafka 4.4 answers it GROUP_ID_NOT_FOUND
                code = ErrorCode.group_id_not_found
            else:
                try:
                    group.validate_delete_group()
                    records += self._delete_group_records(group)
                except CoordinatorError as e:
                    code = e.code
            response.results.add(group_id=group_id, error_code=code.value)
        return CoordinatorResult(records=records, response=response)

    def _describe_consumer(self, group: ConsumerGroup) -> pb.DescribedGroup:
        described = pb.DescribedGroup(
            group_id=group.group_id,
            group_state=group.state_name(),
            protocol_type="consumer",
            protocol_data=self._default_assignor,
        )
        image = self.data.image
        for m in group.members.values():
            dm = described.members.add(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host
            )
            if m.instance_id is not None:
                dm.group_instance_id = m.instance_id
            assigned: dict[str, list[int]] = {}
            for topic_id, partitions in m.assigned.items():
                name = image.topic_name(topic_id)
                if name is not None and partitions:
                    assigned[name] = sorted(partitions)
            topics = sorted(group.member_subscribed_names(m))
            dm.member_metadata = encode_subscription(Subscription(topics, owned_partitions=assigned))
            dm.member_assignment = encode_assignment(Assignment(assigned))
        return described


def _describe_classic(group: ClassicGroup) -> pb.DescribedGroup:
    """Members with metadata and assignment only once Stable (as Kafka: mid-rebalance they
    are not settled yet); the protocol name likewise."""
    stable = group.state is ClassicGroupState.STABLE
    described = pb.DescribedGroup(
        group_id=group.group_id,
        group_state=group.state_name(),
        protocol_type=group.protocol_type,
        protocol_data=(group.protocol_name or "") if stable else "",
    )
    for m in group.members.values():
        dm = described.members.add(member_id=m.member_id, client_id=m.client_id, client_host=m.client_host)
        if m.group_instance_id is not None:
            dm.group_instance_id = m.group_instance_id
        if stable:
            dm.member_metadata = m.metadata(group.protocol_name)
            dm.member_assignment = m.assignment
    return described
