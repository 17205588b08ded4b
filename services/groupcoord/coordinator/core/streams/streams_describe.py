"""StreamsGroupDescribe v0: what a streams group looks like (Kafka's
``StreamsGroup.asDescribedGroup``).

Read-only. The topology is described as configured against the current topics (the internal
topics with the partition counts decided for them), else as the members sent it. Each member
shows its current and its target tasks. A group id of another type is GROUP_ID_NOT_FOUND,
"Group x is not a streams group.", as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.group import authorized_operations, not_found_message
from groupcoord.coordinator.core.streams import streams_heartbeat
from groupcoord.coordinator.core.streams.reconciliation import TasksTuple
from groupcoord.coordinator.core.streams.streams_group import StreamsGroup, task_ids
from groupcoord.coordinator.core.streams.topology import InternalTopic
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.rpc.v1 import streams_group_pb2 as rpc


def _assignment(into: rpc.StreamsDescribedAssignment, tasks: TasksTuple) -> None:
    into.SetInParent()
    into.active_tasks.extend(task_ids(tasks.active, rpc.StreamsTaskIds))
    into.standby_tasks.extend(task_ids(tasks.standby, rpc.StreamsTaskIds))
    into.warmup_tasks.extend(task_ids(tasks.warmup, rpc.StreamsTaskIds))


def _topic(topic: InternalTopic, partitions: int) -> rpc.StreamsTopicInfo:
    return rpc.StreamsTopicInfo(
        name=topic.name,
        partitions=partitions,
        replication_factor=topic.replication_factor,
        topic_configs=[rpc.StreamsKeyValue(key=k, value=v) for k, v in sorted(topic.configs.items())],
    )


def _describe_topology(out: rpc.StreamsGroupDescribeGroup, group: StreamsGroup, image: TopicsImage) -> None:
    if group.topology is None:
        return
    decided = {t.name: t.partitions for t in streams_heartbeat.configured(group.group_id, group.topology, image)[0].topics_to_create}

    def partitions(topic: InternalTopic) -> int:
        topic_id = image.topic_id(topic.name)
        return image.num_partitions(topic_id) if topic_id is not None else decided.get(topic.name, topic.partitions)

    out.topology.epoch = group.topology.epoch
    for sub in sorted(group.topology.subtopologies, key=lambda s: s.subtopology_id):
        out.topology.subtopologies.add(
            subtopology_id=sub.subtopology_id,
            source_topics=sorted(sub.source_topics),
            repartition_sink_topics=sorted(sub.repartition_sink_topics),
            state_changelog_topics=[_topic(t, partitions(t)) for t in sub.state_changelog_topics],
            repartition_source_topics=[_topic(t, partitions(t)) for t in sub.repartition_source_topics],
        )


def describe(
    groups: Mapping[str, Any], request: rpc.StreamsGroupDescribeRequest, image: TopicsImage
) -> rpc.StreamsGroupDescribeResponse:
    response = rpc.StreamsGroupDescribeResponse()
    for group_id in request.group_ids:
        out = response.groups.add(group_id=group_id)
        out.authorized_operations = authorized_operations(request.include_authorized_operations)
        group = groups.get(group_id)
        if not isinstance(group, StreamsGroup):
            out.error_code = ErrorCode.group_id_not_found.value
            out.error_message = not_found_message(group_id, group, "streams")
            continue
        out.group_state = group.state_name()
        out.group_epoch = group.group_epoch
        out.assignment_epoch = group.assignment_epoch
        _describe_topology(out, group, image)
        for member_id in sorted(group.members):
            m = group.members[member_id]
            dm = out.members.add(
                member_id=member_id,
                member_epoch=m.tasks.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                topology_epoch=m.topology_epoch,
                process_id=m.tasks.process_id,
                client_tags=[rpc.StreamsKeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
            )
            if m.instance_id is not None:
                dm.instance_id = m.instance_id
            if m.rack_id is not None:
                dm.rack_id = m.rack_id
            if m.user_endpoint is not None:
                dm.user_endpoint.host, dm.user_endpoint.port = m.user_endpoint
            _assignment(dm.assignment, m.tasks.assigned)
            _assignment(dm.target_assignment, group.targets.get(member_id, TasksTuple()))
    return response
