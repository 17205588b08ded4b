"""Share groups as the third group type of a coordinator shard: a share consumer joins, is
described, listed and leaves through the shard's API; the records replay into the same state
after a takeover, which gives every member a fresh session; and a group id names one group
only: every other protocol is refused on a share group, and a share member on theirs, with
Kafka's errors (``GroupMetadataManager``'s ``getOrMaybeCreate*Group`` and ``ShareGroup``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the core tests' drivers

from kio.schema.errors import ErrorCode
from shard_test_context import ShardContext  # noqa: E402

from groupcoord.common.errors import CoordinatorError  # noqa: E402
from groupcoord.coordinator.core.config import GroupConfig  # noqa: E402
from groupcoord.coordinator.core.share.share_group import ShareGroup  # noqa: E402
from groupcoord.rpc.v1 import classic_group_pb2 as classic_pb  # noqa: E402
from groupcoord.rpc.v1 import consumer_group_pb2 as consumer_pb  # noqa: E402
from groupcoord.rpc.v1 import group_admin_pb2 as admin_pb  # noqa: E402
from groupcoord.rpc.v1 import offsets_pb2 as offsets_pb  # noqa: E402
from groupcoord.rpc.v1 import share_group_pb2 as pb  # noqa: E402
from tests.coordinator.core.test_assignors import image, tid  # noqa: E402

SESSION_MS = 45_000


def context() -> ShardContext:
    ctx = ShardContext(GroupConfig(classic_group_initial_rebalance_delay_ms=0, share_group_max_size=3))
    ctx.apply(ctx.shard.on_metadata_update(image(orders=2, payments=3), 0))
    return ctx


def beat(
    ctx: ShardContext, member: str, epoch: int, topics: list[str] | None = None, group: str = "g"
) -> pb.ShareGroupHeartbeatResponse:
    request = pb.ShareGroupHeartbeatRequest(
        api_version=1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        client_id=f"c-{member}",
        client_host="/10.0.0.1",
    )
    if topics is not None:
        request.subscribed_topic_names.names.extend(topics)
    token, _ = ctx.call("share_group_heartbeat", request)
    return ctx.answer(token)


def assigned(response: pb.ShareGroupHeartbeatResponse) -> dict[bytes, list[int]]:
    return {t.topic_id: list(t.partitions) for t in response.assignment.topic_partitions}


def test_a_share_consumer_joins_is_described_listed_and_leaves() -> None:
    ctx = context()
    a = beat(ctx, "a", 0, ["orders"])
    assert (a.error_code, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (0, "a", 1, 5_000)
    assert assigned(a) == {tid("orders"): [0, 1]}
    b = beat(ctx, "b", 0, ["orders", "payments"])
    assert b.member_epoch == 2
    # a learns the new epoch and its share of the partitions at its next heartbeat
    a = beat(ctx, "a", 1)
    assert a.member_epoch == 2 and a.HasField("assignment")
    steady = beat(ctx, "a", 2)
    assert steady.member_epoch == 2 and not steady.HasField("assignment"), "nothing new: no assignment"

    token, _ = ctx.call("share_group_describe", pb.ShareGroupDescribeRequest(group_ids=["g", "nope"]))
    described, missing = ctx.answer(token).groups
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Stable", 2, 2)
    assert described.assignor_name == "simple"
    assert [
        (m.member_id, m.client_id, m.client_host, list(m.subscribed_topic_names)) for m in described.members
    ] == [
        ("a", "c-a", "/10.0.0.1", ["orders"]),
        ("b", "c-b", "/10.0.0.1", ["orders", "payments"]),
    ]
    names = {t.topic_name for m in described.members for t in m.assignment.topic_partitions}
    assert names == {"orders", "payments"}
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.group_id_not_found.value,
        "Group nope not found.",
    )

    token, _ = ctx.call("list_groups", admin_pb.ListGroupsRequest(api_version=5, types_filter=["share"]))
    [listed] = ctx.answer(token).groups
    assert (listed.group_id, listed.protocol_type, listed.group_state, listed.group_type) == (
        "g",
        "share",
        "Stable",
        "share",
    )
    assert ctx.shard.metrics().group_counts() == {"consumer": 0, "classic": 0, "share": 1}

    assert beat(ctx, "b", -1).member_epoch == -1
    assert beat(ctx, "a", -1).member_epoch == -1
    token, _ = ctx.call("delete_groups", admin_pb.DeleteGroupsRequest(groups_names=["g"]))
    assert ctx.answer(token).results[0].error_code == 0
    assert "g" not in ctx.shard.groups
    ctx.assert_replay_equals_live()


def test_replay_rebuilds_the_share_groups_and_a_takeover_gives_every_member_a_fresh_session() -> None:
    ctx = context()
    beat(ctx, "a", 0, ["orders"])
    beat(ctx, "b", 0, ["payments"], group="h")
    ctx.assert_replay_equals_live()
    fresh = ctx.replayed()
    assert isinstance(fresh.groups["g"], ShareGroup) and set(fresh.groups["h"].members) == {"b"}
    loaded = fresh.on_loaded(100_000)
    sessions = sorted((t.key, t.delay_ms) for t in loaded.timers if t.key.startswith("share-session:"))
    assert sessions == [("share-session:g:a", SESSION_MS), ("share-session:h:b", SESSION_MS)]


def test_a_member_that_stops_heartbeating_is_removed_after_its_session() -> None:
    ctx = context()
    beat(ctx, "a", 0, ["orders"])
    beat(ctx, "b", 0, ["orders"])
    ctx.advance(SESSION_MS - 1)
    assert beat(ctx, "a", 1).member_epoch == 2
    ctx.advance(2)
    assert set(ctx.shard.groups["g"].members) == {"a"}, "b's session ran out"
    ctx.advance(SESSION_MS)
    assert ctx.shard.groups["g"].is_empty()
    ctx.assert_replay_equals_live()


def consumer_join(group: str) -> consumer_pb.ConsumerGroupHeartbeatRequest:
    return consumer_pb.ConsumerGroupHeartbeatRequest(
        api_version=1,
        group_id=group,
        member_id="c",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=consumer_pb.ConsumerGroupHeartbeatTopicNames(names=["orders"]),
        topic_partitions=consumer_pb.ConsumerGroupHeartbeatOwnedPartitions(),
    )


def refused(ctx: ShardContext, api: str, request: object) -> tuple[int, str]:
    """(error code, message) of a refused request: a handler raises it (the worker answers it
    as the request's error) or answers it."""
    try:
        token, _ = ctx.call(api, request)
    except CoordinatorError as e:
        return e.code.value, e.message or ""
    answer = ctx.answer(token)
    return answer.error_code, answer.error_message


def test_a_group_id_names_one_group_whatever_its_type() -> None:
    ctx = context()
    beat(ctx, "a", 0, ["orders"])
    not_found = ErrorCode.group_id_not_found.value
    # a consumer (KIP-848) member on the share group's id
    assert refused(ctx, "consumer_group_heartbeat", consumer_join("g")) == (
        not_found,
        "Group g is not a consumer group.",
    )
    # a classic member: Kafka 4.4 answers INCONSISTENT_GROUP_PROTOCOL
    token, _ = ctx.call(
        "join_group",
        classic_pb.JoinGroupRequest(
            api_version=9,
            group_id="g",
            member_id="",
            protocol_type="consumer",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            protocols=[classic_pb.JoinGroupProtocol(name="range")],
        ),
    )
    assert ctx.answer(token).error_code == ErrorCode.inconsistent_group_protocol.value
    # offsets: a share group commits none, and a fetch finds none (no error, as Kafka 4.4)
    token, _ = ctx.call(
        "offset_fetch",
        offsets_pb.OffsetFetchRequest(
            api_version=8, groups=[offsets_pb.OffsetFetchRequestGroup(group_id="g", all_topics=True)]
        ),
    )
    fetched = ctx.answer(token).groups[0]
    assert (fetched.error_code, list(fetched.topics)) == (0, [])
    token, _ = ctx.call(
        "offset_commit",
        offsets_pb.OffsetCommitRequest(
            api_version=9,
            group_id="g",
            generation_id_or_member_epoch=-1,
            topics=[
                offsets_pb.OffsetCommitRequestTopic(
                    name="orders", partitions=[offsets_pb.OffsetCommitRequestPartition(partition_index=0)]
                )
            ],
        ),
    )
    [committed] = ctx.answer(token).topics[0].partitions
    assert committed.error_code == not_found
    # DescribeGroups describes classic groups only: Dead, and at v6 Kafka's error
    token, _ = ctx.call("describe_groups", admin_pb.DescribeGroupsRequest(api_version=6, groups=["g"]))
    [described] = ctx.answer(token).groups
    assert (described.group_state, described.error_code, described.error_message) == (
        "Dead",
        not_found,
        "Group g is not a classic group.",
    )
    assert set(ctx.shard.groups["g"].members) == {"a"}, "the share group is left alone by all of it"
    # emptied, it stays a share group: no conversion exists
    assert beat(ctx, "a", -1).error_code == 0
    assert refused(ctx, "consumer_group_heartbeat", consumer_join("g"))[0] == not_found
    assert isinstance(ctx.shard.groups["g"], ShareGroup)

    # and a share member on a consumer group's id
    ctx.call("consumer_group_heartbeat", consumer_join("k"))
    assert refused(
        ctx,
        "share_group_heartbeat",
        pb.ShareGroupHeartbeatRequest(
            api_version=1,
            group_id="k",
            member_id="s",
            member_epoch=0,
            subscribed_topic_names=pb.ShareGroupHeartbeatTopicNames(names=["orders"]),
        ),
    ) == (not_found, "Group k is not a share group.")
    ctx.assert_replay_equals_live()


def test_a_share_group_s_own_session_timeout_and_heartbeat_interval_apply() -> None:
    ctx = context()
    ctx.set_group_configs("g", share_session_timeout_ms="50000", share_heartbeat_interval_ms="6000")
    assert beat(ctx, "a", 0, ["orders"]).heartbeat_interval_ms == 6_000
    ctx.advance(49_999)
    assert set(ctx.shard.groups["g"].members) == {"a"}
    ctx.advance(1)
    assert not ctx.shard.groups["g"].members, "gone after the group's 50 s, not the default 45 s"
    fresh = ctx.replayed()
    assert fresh.data.group_configs == ctx.shard.data.group_configs
