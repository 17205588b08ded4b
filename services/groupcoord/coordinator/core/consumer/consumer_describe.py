"""ConsumerGroupDescribe v0/v1: what a consumer group looks like (Kafka's ConsumerGroup.asDescribedGroup).

Read-only. Topic names come from the current topics image (a partition of a topic the image
no longer knows is described by id with an empty name).
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup
from groupcoord.coordinator.core.group import Group, authorized_operations, not_found_message
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

CONSUMER_MEMBER_TYPE, CLASSIC_MEMBER_TYPE = 1, 0


def describe_consumer_groups(
    request: pb.ConsumerGroupDescribeRequest,
    groups: Mapping[str, Group],
    image: TopicsImage,
    default_assignor: str,
) -> pb.ConsumerGroupDescribeResponse:
    response = pb.ConsumerGroupDescribeResponse()
    for group_id in request.group_ids:
        out = response.groups.add(group_id=group_id)
        out.authorized_operations = authorized_operations(request.include_authorized_operations)
        group = groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            out.error_code = ErrorCode.group_id_not_found.value
            out.error_message = not_found_message(group_id, group, "consumer")
            continue
        out.group_state = group.state_name()
        out.group_epoch = group.group_epoch
        out.assignment_epoch = group.assignment_epoch
        out.assignor_name = group.preferred_assignor(default_assignor)
        for member_id in sorted(group.members):
            m = group.members[member_id]
            dm = out.members.add(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                member_type=CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
            )
            if m.instance_id is not None:
                dm.instance_id = m.instance_id
            if m.rack_id is not None:
                dm.rack_id = m.rack_id
            if m.subscribed_topic_regex is not None:
                dm.subscribed_topic_regex = m.subscribed_topic_regex
            _fill(dm.assignment, m.assigned_partitions(), image)
            _fill(dm.target_assignment, group.target.get(member_id, {}), image)
    return response


def _fill(
    into: pb.ConsumerGroupDescribeAssignment, partitions: Mapping[bytes, frozenset[int]], image: TopicsImage
) -> None:
    into.SetInParent()
    for tid in sorted(partitions, key=lambda t: (image.topic_name(t) or "", t)):
        if partitions[tid]:
            into.topic_partitions.add(
                topic_id=tid, topic_name=image.topic_name(tid) or "", partitions=sorted(partitions[tid])
            )
