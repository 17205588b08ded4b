"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets at the group's
shard: a share group's start offsets, read, reset and forgotten (``kafka-share-groups.sh
--describe``, ``--reset-offsets``, ``--delete-offsets``).

A share group's "offset" in a partition is its share-partition's start offset (SPSO): every
record below it is done. Describe answers it for each share-partition the group has read (a
partition never read is -1), with how many records from there on are already done, which the
gateway takes off the lag (KIP-1226: lag = high watermark - start offset - done records in
flight). Alter and delete need the group empty, as Kafka (NON_EMPTY_GROUP); an alter of a
group that does not exist sets it up, empty, as Kafka 4.2+ does (KAFKA-19662). An altered
share-partition starts again at the offset given with a new state epoch and nothing in flight;
a deleted one is forgotten, and the next fetch starts where ``share.auto.offset.reset`` says.
Topics are named; the shard's topics image gives their ids (an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.group import Group, not_found_message
from groupcoord.coordinator.core.share import share_partition as sp
from groupcoord.coordinator.core.share.delivery import SharePartitionKey, state_record
from groupcoord.coordinator.core.share.share_group import ShareGroup
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.rpc.v1 import share_group_pb2 as pb

States = dict[SharePartitionKey, sp.SharePartition]


def _group_error(group_id: str, group: Group | None) -> tuple[ErrorCode, str] | None:
    if isinstance(group, ShareGroup):
        return None
    return ErrorCode.group_id_not_found, not_found_message(group_id, group, "share")


def describe(
    request: pb.DescribeShareGroupOffsetsRequest, groups: dict[str, Group], states: States, image: TopicsImage
) -> CoordinatorResult[pb.DescribeShareGroupOffsetsResponse]:
    response = pb.DescribeShareGroupOffsetsResponse()
    for asked in request.groups:
        out = response.groups.add(group_id=asked.group_id)
        # A group that does not exist has no offsets, and no error (Kafka 4.4): the tools ask
        # before they give a new share group its offsets (--reset-offsets --from-file).
        group = groups.get(asked.group_id)
        refused = None if group is None else _group_error(asked.group_id, group)
        if refused is not None:
            out.error_code, out.error_message = refused[0].value, refused[1]
            continue
        if asked.all_topics:
            mine = sorted(k for k in states if k[0] == asked.group_id)
            by_topic: dict[bytes, list[int]] = {}
            for _, tid, index in mine:
                by_topic.setdefault(tid, []).append(index)
            wanted = [(image.topic_name(tid), tid, parts) for tid, parts in by_topic.items()]
            wanted = sorted((n, t, p) for n, t, p in wanted if n is not None)  # a deleted topic: gone
        else:
            wanted = [(t.topic_name, image.topic_id(t.topic_name), list(t.partitions)) for t in asked.topics]
        for name, tid, parts in wanted:
            topic = out.topics.add(topic_name=name, topic_id=tid or b"")
            for index in parts:
                part = topic.partitions.add(partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1)
                if tid is None:
                    part.error_code = ErrorCode.unknown_topic_or_partition.value
                    part.error_message = "This server does not host this topic-partition."
                    continue
                state = states.get((asked.group_id, tid, index))
                if state is not None:
                    # the window holds every offset from the start: what is not in flight is done
                    part.start_offset, part.done = state.start_offset, len(state.deliveries) - state.in_flight()
    return CoordinatorResult(response=response)


def alter(
    request: pb.AlterShareGroupOffsetsRequest, groups: dict[str, Group], states: States, image: TopicsImage
) -> CoordinatorResult[pb.AlterShareGroupOffsetsResponse]:
    """AlterShareGroupOffsets, or DeleteShareGroupOffsets when ``request.delete``."""
    response = pb.AlterShareGroupOffsetsResponse()
    group = groups.get(request.group_id)
    # Kafka since 4.2 (KAFKA-19662) sets a share group up on an alter: start offsets can be
    # given before the group is first used. A delete still needs the group.
    creating = group is None and not request.delete
    refused = None if creating else _group_error(request.group_id, group)
    if refused is None and group is not None and not group.is_empty():
        refused = ErrorCode.non_empty_group, "The group is not empty."
    if refused is not None:
        response.error_code, response.error_message = refused[0].value, refused[1]
        return CoordinatorResult(response=response)
    records: list[CoordinatorRecord] = []
    for asked in request.topics:
        tid = image.topic_id(asked.topic_name)
        topic = response.responses.add(topic_name=asked.topic_name, topic_id=tid or b"")
        if request.delete:
            if tid is None:
                topic.error_code = ErrorCode.unknown_topic_or_partition.value
                topic.error_message = "This server does not host this topic-partition."
                continue
            records += [state_record(k, None) for k in sorted(states) if k[0] == request.group_id and k[1] == tid]
            continue
        for index, offset in zip(asked.partitions, asked.start_offsets, strict=True):
            part = topic.partitions.add(partition_index=index)
            known = image.topic(tid) if tid is not None else None
            if known is None or not 0 <= index < known.num_partitions:
                part.error_code = ErrorCode.unknown_topic_or_partition.value
                part.error_message = "This server does not host this topic-partition."
                continue
            key = (request.group_id, tid, index)
            old = states.get(key)
            epoch = old.state_epoch + 1 if old is not None else 0
            records.append(state_record(key, sp.SharePartition.starting_at(offset, epoch)))
    if creating and records:  # the group first, at epoch 0 with no members: Empty
        records.insert(0, ShareGroup(request.group_id).metadata_record(0, 0))
    return CoordinatorResult(records=records, response=response)
