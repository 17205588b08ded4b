"""ShareGroupDescribe v1: what a share group looks like (Kafka's ShareGroup.asDescribedGroup).

Read-only, like ConsumerGroupDescribe (``consumer/consumer_describe.py``): the assignor is always
``simple`` (share groups have no other), and each member shows the assignment it was last
told. Topic names come from the current topics image (a topic it no longer knows is described
by id with an empty name). A group id of another type is GROUP_ID_NOT_FOUND, "Group x is not a
share group.", as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.group import Group, authorized_operations, not_found_message
from groupcoord.coordinator.core.share.share_group import ShareGroup
from groupcoord.coordinator.core.share.share_heartbeat import ASSIGNOR
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.rpc.v1 import share_group_pb2 as pb


def describe_share_groups(
    request: pb.ShareGroupDescribeRequest, groups: Mapping[str, Group], image: TopicsImage
) -> pb.ShareGroupDescribeResponse:
    response = pb.ShareGroupDescribeResponse()
    for group_id in request.group_ids:
        out = response.groups.add(group_id=group_id)
        out.authorized_operations = authorized_operations(request.include_authorized_operations)
        group = groups.get(group_id)
        if not isinstance(group, ShareGroup):
            out.error_code = ErrorCode.group_id_not_found.value
            out.error_message = not_found_message(group_id, group, "share")
            continue
        out.group_state = group.state_name()
        out.group_epoch = group.group_epoch
        out.assignment_epoch = group.assignment_epoch
        out.assignor_name = ASSIGNOR.name
        for member_id in sorted(group.members):
            m = group.members[member_id]
            dm = out.members.add(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
            )
            if m.rack_id is not None:
                dm.rack_id = m.rack_id
            dm.assignment.SetInParent()
            for tid in sorted(m.assigned, key=lambda t: (image.topic_name(t) or "", t)):
                if m.assigned[tid]:
                    dm.assignment.topic_partitions.add(
                        topic_id=tid,
                        topic_name=image.topic_name(tid) or "",
                        partitions=sorted(m.assigned[tid]),
                    )
    return response
