"""Streams groups (KIP-1071) as the fourth group type of a coordinator shard, in the steps of
Kafka's ``streamsGroupHeartbeat``: the first member's topology becomes the group's; while an
internal topic is missing the group is NotReady, every member hears MISSING_INTERNAL_TOPICS and
the shard names the topics to create; once the topics exist the tasks are assigned, and a second
process gets its share only after the first has revoked it; members commit offsets at their
epoch; a member that goes silent is fenced; replay after a takeover equals the live state."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the core tests' drivers

from kio.schema.errors import ErrorCode  # noqa: E402
from shard_test_context import ShardContext  # noqa: E402

from groupcoord.coordinator.core.config import GroupConfig  # noqa: E402
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage  # noqa: E402
from groupcoord.rpc.v1 import group_admin_pb2 as admin_pb  # noqa: E402
from groupcoord.rpc.v1 import streams_group_pb2 as pb  # noqa: E402

APP = "wordcount"
CHANGELOG = f"{APP}-counts-changelog"
REPARTITION = f"{APP}-words-repartition"
MISSING_INTERNAL_TOPICS, STALE_TOPOLOGY = 3, 0


def image(**counts: int) -> TopicsImage:
    return TopicsImage.of(
        TopicImage(uuid.uuid5(uuid.NAMESPACE_OID, n).bytes, n, c, ()) for n, c in counts.items()
    )


def topology(epoch: int = 0) -> pb.StreamsTopology:
    """Word count: subtopology 0 reads `lines` and writes the repartition topic, 1 reads it and
    counts into a store (its changelog)."""
    out = pb.StreamsTopology(epoch=epoch)
    out.subtopologies.add(subtopology_id="0", source_topics=["lines"], repartition_sink_topics=[REPARTITION])
    one = out.subtopologies.add(subtopology_id="1")
    one.repartition_source_topics.add(name=REPARTITION, partitions=0, replication_factor=0)
    one.state_changelog_topics.add(
        name=CHANGELOG, topic_configs=[pb.StreamsKeyValue(key="cleanup.policy", value="compact")]
    )
    return out


def context(delay_ms: int = 0, **topics: int) -> ShardContext:
    """A shard with these topics (and no initial rebalance delay unless asked for)."""
    ctx = ShardContext(GroupConfig(streams_group_initial_rebalance_delay_ms=delay_ms))
    ctx.apply(ctx.shard.on_metadata_update(image(**topics), 0))
    return ctx


def beat(
    ctx: ShardContext,
    member: str,
    epoch: int,
    *,
    process: str | None = None,
    owned: dict[str, list[int]] | None = None,
    joining_topology: pb.StreamsTopology | None = None,
) -> pb.StreamsGroupHeartbeatResponse:
    request = pb.StreamsGroupHeartbeatRequest(
        api_version=0, group_id=APP, member_id=member, member_epoch=epoch, rebalance_timeout_ms=-1,
        client_id=f"c-{member}", client_host="/10.0.0.1",
    )  # fmt: skip
    if epoch == 0:
        request.rebalance_timeout_ms = 30_000
        request.topology.CopyFrom(joining_topology or topology())
        request.process_id = process or f"process-{member}"
        for kind in ("active_tasks", "standby_tasks", "warmup_tasks"):
            getattr(request, kind).SetInParent()
    if owned is not None:
        for kind in ("active_tasks", "standby_tasks", "warmup_tasks"):
            getattr(request, kind).SetInParent()
        for s, ps in owned.items():
            request.active_tasks.tasks.add(subtopology_id=s, partitions=ps)
    token, _ = ctx.call("streams_group_heartbeat", request)
    return ctx.answer(token)


def active(response: pb.StreamsGroupHeartbeatResponse) -> dict[str, list[int]]:
    return {t.subtopology_id: list(t.partitions) for t in response.active_tasks.tasks}


def statuses(response: pb.StreamsGroupHeartbeatResponse) -> list[int]:
    return [s.status_code for s in response.status.statuses]


def test_the_group_waits_for_its_internal_topics_then_assigns_every_task() -> None:
    ctx = context(lines=2)
    a = beat(ctx, "a", 0)
    assert (a.error_code, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (0, "a", 1, 5_000)
    assert statuses(a) == [MISSING_INTERNAL_TOPICS] and active(a) == {}
    # the repartition topic is as wide as its writer's input; the changelog as its subtopology
    created = {(t.name, t.partitions, t.replication_factor) for t in a.topics_to_create}
    assert created == {(REPARTITION, 2, -1), (CHANGELOG, 2, -1)}
    assert {c.key: c.value for t in a.topics_to_create if t.name == CHANGELOG for c in t.configs} == {
        "cleanup.policy": "compact"
    }
    assert ctx.shard.groups[APP].state_name() == "NotReady"

    # the gateway created them; the next image has them and the next heartbeat gets every task
    ctx.apply(ctx.shard.on_metadata_update(image(lines=2, **{REPARTITION: 2, CHANGELOG: 2}), 0))
    a = beat(ctx, "a", 1, owned={})
    assert a.member_epoch == 2 and not a.HasField("status") and not a.topics_to_create
    assert active(a) == {"0": [0, 1], "1": [0, 1]}
    steady = beat(ctx, "a", 2, owned=active(a))
    assert steady.member_epoch == 2 and not steady.HasField("active_tasks"), "nothing new: no tasks"
    assert ctx.shard.groups[APP].state_name() == "Stable"
    ctx.assert_replay_equals_live()


def ready_context(delay_ms: int = 0) -> ShardContext:
    return context(delay_ms, lines=2, **{REPARTITION: 2, CHANGELOG: 2})


def test_a_new_groups_first_assignment_waits_for_its_initial_rebalance_delay() -> None:
    ctx = ready_context(delay_ms=3_000)
    a = beat(ctx, "a", 0)
    delayed = [(s.status_code, s.status_detail) for s in a.status.statuses]
    assert delayed == [(5, "Assignment delayed due to the configured initial rebalance delay.")]
    assert a.member_epoch == 1 and active(a) == {}
    b = beat(ctx, "b", 0)
    assert statuses(b) == [5] and b.member_epoch == 1
    assert ctx.shard.groups[APP].state_name() == "Assigning"
    ctx.advance(3_000)  # the delay ends: one target for both members
    a = beat(ctx, "a", 1, owned={})
    b = beat(ctx, "b", 1, owned={})
    assert not a.HasField("status") and (a.member_epoch, b.member_epoch) == (3, 3), "the delay ends at a new epoch"
    split = [(s, p) for r in (a, b) for s, ps in active(r).items() for p in ps]
    assert sorted(split) == [("0", 0), ("0", 1), ("1", 0), ("1", 1)] and active(a) and active(b)
    ctx.assert_replay_equals_live()


def test_a_second_process_gets_its_tasks_once_the_first_revoked_them() -> None:
    ctx = ready_context()
    a = beat(ctx, "a", 0)
    assert active(a) == {"0": [0, 1], "1": [0, 1]}
    b = beat(ctx, "b", 0)
    assert b.member_epoch == 2 and active(b) == {}, "b waits: a still owns what it is to get"
    # a is told to give up half (it stays at its epoch until it has)
    a2 = beat(ctx, "a", a.member_epoch, owned=active(a))
    kept = active(a2)
    assert a2.member_epoch == 1 and sum(map(len, kept.values())) == 2
    a3 = beat(ctx, "a", 1, owned=kept)
    assert a3.member_epoch == 2
    b2 = beat(ctx, "b", 2, owned={})
    given = active(b2)
    assert sum(map(len, given.values())) == 2
    every = {(s, p) for tasks in (kept, given) for s, ps in tasks.items() for p in ps}
    assert len(every) == 4, "every task active exactly once"
    assert ctx.shard.groups[APP].state_name() == "Stable"
    ctx.assert_replay_equals_live()


def test_members_commit_at_their_epoch_and_a_silent_member_is_fenced() -> None:
    ctx = ready_context()
    a = beat(ctx, "a", 0)
    assert ctx.commit(APP, {("lines", 0): 5}, member_id="a", generation=a.member_epoch) == {("lines", 0): 0}
    assert ctx.commit(APP, {("lines", 0): 6}, member_id="a", generation=a.member_epoch + 1) == {
        ("lines", 0): ErrorCode.stale_member_epoch.value
    }
    assert ctx.commit(APP, {("lines", 0): 6}, member_id="x", generation=1) == {
        ("lines", 0): ErrorCode.unknown_member_id.value
    }
    ctx.advance(45_001)
    assert ctx.shard.groups[APP].state_name() == "Empty"
    late = beat(ctx, "a", a.member_epoch, owned=active(a))
    assert (late.error_code, late.error_message) == (
        ErrorCode.unknown_member_id.value,
        f"Member a is not a member of group {APP}.",
    )
    assert ctx.fetch(APP) == {("lines", 0): 5}, "the offsets outlive the members"
    ctx.assert_replay_equals_live()


def test_leave_describe_list_and_kafkas_request_errors() -> None:
    ctx = ready_context()
    assert beat(ctx, "a", 0).member_epoch == 1
    token, _ = ctx.call("streams_group_describe", pb.StreamsGroupDescribeRequest(group_ids=[APP, "nope"]))
    described, missing = ctx.answer(token).groups
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Stable", 1, 1)
    [m] = described.members
    assert (m.member_id, m.process_id, m.client_id) == ("a", "process-a", "c-a")
    assert {t.subtopology_id for t in m.assignment.active_tasks} == {"0", "1"}
    assert [s.subtopology_id for s in described.topology.subtopologies] == ["0", "1"]
    assert (missing.error_code, missing.error_message) == (ErrorCode.group_id_not_found.value, "Group nope not found.")
    token, _ = ctx.call("list_groups", admin_pb.ListGroupsRequest(api_version=5, types_filter=["streams"]))
    [listed] = ctx.answer(token).groups
    assert (listed.group_id, listed.protocol_type, listed.group_type) == (APP, "streams", "streams")

    # Kafka's request checks, in its order
    no_topology = pb.StreamsGroupHeartbeatRequest(group_id=APP, member_id="b", member_epoch=0, rebalance_timeout_ms=1)
    token, _ = ctx.call("streams_group_heartbeat", no_topology)
    assert (ctx.answer(token).error_code, ctx.answer(token).error_message) == (
        ErrorCode.invalid_request.value,
        "Topology must be non-null when (re-)joining.",
    )
    changed = topology()
    changed.subtopologies[0].source_topics.append("more-lines")
    assert beat(ctx, "b", 0, joining_topology=changed).error_message == "Topology updates are not supported yet."
    stale = beat(ctx, "c", 0, joining_topology=topology(epoch=-1))
    assert STALE_TOPOLOGY in statuses(stale)

    left = beat_leave(ctx, "a")
    assert (left.error_code, left.member_epoch) == (0, -1)
    ctx.assert_replay_equals_live()


def beat_leave(ctx: ShardContext, member: str) -> pb.StreamsGroupHeartbeatResponse:
    token, _ = ctx.call(
        "streams_group_heartbeat",
        pb.StreamsGroupHeartbeatRequest(group_id=APP, member_id=member, member_epoch=-1, rebalance_timeout_ms=-1),
    )
    return ctx.answer(token)


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    ctx = ready_context()
    a = beat(ctx, "a", 0)  # joins with a rebalance timeout of 30 s
    every = active(a)
    beat(ctx, "b", 0)
    told = beat(ctx, "a", a.member_epoch, owned=every)
    assert sum(map(len, active(told).values())) == 2, "a is asked to give up half"
    for _ in range(5):  # a keeps heartbeating, but keeps running every task
        ctx.advance(5_000)
        assert beat(ctx, "a", a.member_epoch, owned=every).error_code == 0
        beat(ctx, "b", 2, owned={})
    ctx.advance(10_001)
    assert APP in ctx.shard.groups and "a" not in ctx.shard.groups[APP].members
    late = beat(ctx, "a", a.member_epoch, owned=every)
    assert late.error_code == ErrorCode.unknown_member_id.value
    b = beat(ctx, "b", 2, owned={})
    assert b.member_epoch == 3 and active(b) == {"0": [0, 1], "1": [0, 1]}, "b gets everything a held"
    ctx.assert_replay_equals_live()


def test_a_commit_racing_an_epoch_bump_is_accepted_for_a_task_still_held() -> None:
    """Streams commits what it processed before it hears the new epoch: at the previous epoch,
    for a partition of an active task it still holds (assigned or being revoked), the commit
    is accepted; for one it does not hold, or at an older epoch, STALE_MEMBER_EPOCH."""
    ctx = ready_context()
    a = beat(ctx, "a", 0)
    beat(ctx, "b", 0)  # the group epoch moves on; a is asked to give up half
    told = beat(ctx, "a", a.member_epoch, owned=active(a))
    kept = active(told)
    a2 = beat(ctx, "a", 1, owned=kept)
    assert a2.member_epoch == 2
    # the topic partition of each task a kept (subtopology 0 reads lines, 1 the repartition topic)
    topic_of = {"0": "lines", "1": REPARTITION}
    still = {(topic_of[s], p) for s, ps in kept.items() for p in ps}
    assert len(still) == 2
    assert ctx.commit(APP, dict.fromkeys(still, 9), member_id="a", generation=1) == dict.fromkeys(still, 0)
    gone = {(topic_of[s], p) for s in ("0", "1") for p in (0, 1)} - still
    assert ctx.commit(APP, dict.fromkeys(gone, 9), member_id="a", generation=1) == dict.fromkeys(
        gone, ErrorCode.stale_member_epoch.value
    )
    assert ctx.commit(APP, {("lines", 0): 9}, member_id="a", generation=0) == {
        ("lines", 0): ErrorCode.stale_member_epoch.value
    }


def test_no_heartbeat_is_served_before_the_first_topics_image() -> None:
    """Right after a takeover the shard has no topics image yet: a heartbeat is told to retry
    (COORDINATOR_LOAD_IN_PROGRESS) rather than the group reconfigured against no topics."""
    ctx = ShardContext(GroupConfig(streams_group_initial_rebalance_delay_ms=0))
    answer = beat(ctx, "a", 0)
    assert answer.error_code == ErrorCode.coordinator_load_in_progress.value
    assert APP not in ctx.shard.groups
