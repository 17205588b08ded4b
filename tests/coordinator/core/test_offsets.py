"""Committed offsets: commit validation, fetch, delete, retention and expiry."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.classic_group import ClassicGroup
from groupcoord.coordinator.core.classic.consumer_protocol import Subscription, encode_subscription
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.rpc.v1 import offsets_pb2 as opb

G = "group"
T0 = ("t", 0)


def test_admin_commit_to_a_missing_group_creates_a_simple_group() -> None:
    ctx = ShardContext()
    assert ctx.commit(G, {T0: 42, ("t", 1): 7}) == {T0: 0, ("t", 1): 0}
    group = ctx.classic(G)
    assert group.state_name() == "Empty" and group.protocol_type == ""
    assert ctx.fetch(G) == {T0: 42, ("t", 1): 7}
    ctx.assert_replay_equals_live()


def test_member_commit_to_a_missing_group_by_version() -> None:
    ctx = ShardContext()
    assert ctx.commit(G, {T0: 1}, member_id="m", generation=1, version=9) == {T0: E.group_id_not_found.value}
    assert ctx.commit(G, {T0: 1}, member_id="m", generation=1, version=8) == {T0: E.illegal_generation.value}
    assert G not in ctx.shard.groups


def test_classic_member_commits_are_validated_against_the_generation() -> None:
    ctx = ShardContext()
    ids, gen = ctx.form_group(G, 2)
    assert ctx.commit(G, {T0: 5}, member_id=ids[0], generation=gen) == {T0: 0}
    assert ctx.commit(G, {T0: 6}, member_id=ids[0], generation=gen + 1) == {T0: E.illegal_generation.value}
    assert ctx.commit(G, {T0: 6}, member_id="ghost", generation=gen) == {T0: E.unknown_member_id.value}
    # An admin commit while the group has members.
    assert ctx.commit(G, {T0: 6}) == {T0: E.unknown_member_id.value}
    assert ctx.fetch(G, [T0]) == {T0: 5}


def test_commit_while_completing_rebalance_is_rebalance_in_progress() -> None:
    ctx = ShardContext()
    a = ctx.join_dynamic(G)
    ctx.advance(0)
    member = ctx.answer(a)
    assert ctx.commit(G, {T0: 1}, member_id=member.member_id, generation=member.generation_id) == {
        T0: E.rebalance_in_progress.value
    }


def test_static_member_commit_with_stale_member_id_is_fenced() -> None:
    ctx = ShardContext()
    token = ctx.join(G, instance_id="i", version=9)
    ctx.advance(0)
    old = ctx.answer(token)
    ctx.sync(G, old.member_id, old.generation_id, {old.member_id: b""}, instance_id="i")
    new = ctx.answer(ctx.join(G, instance_id="i", version=9))
    assert ctx.commit(G, {T0: 1}, member_id=old.member_id, generation=old.generation_id, instance_id="i") == {
        T0: E.fenced_instance_id.value
    }
    assert ctx.commit(G, {T0: 1}, member_id=new.member_id, generation=new.generation_id, instance_id="i") == {
        T0: 0
    }


def test_metadata_larger_than_the_limit_is_rejected_per_partition() -> None:
    ctx = ShardContext(GroupConfig(offset_metadata_max_bytes=4))
    assert ctx.commit(G, {T0: 1}, metadata="12345") == {T0: E.offset_metadata_too_large.value}
    assert ctx.commit(G, {T0: 1}, metadata="1234") == {T0: 0}


def test_fetch_of_unknown_partitions_and_groups_answers_minus_one() -> None:
    ctx = ShardContext()
    ctx.commit(G, {T0: 3})
    assert ctx.fetch(G, [T0, ("t", 9), ("u", 0)]) == {T0: 3, ("t", 9): -1, ("u", 0): -1}
    assert ctx.fetch("nobody", [T0]) == {T0: -1}
    assert ctx.fetch("nobody") == {}


def test_multi_group_fetch_and_topic_ids() -> None:
    ctx = ShardContext()
    tid = bytes(range(16))
    request = opb.OffsetCommitRequest(api_version=10, group_id=G, generation_id_or_member_epoch=-1)
    request.topics.add(name="t", topic_id=tid).partitions.add(partition_index=0, committed_offset=9)
    request.topics.add(topic_id=b"\x01" * 16).partitions.add(partition_index=0, committed_offset=9)
    response = ctx.answer(ctx.call("offset_commit", request)[0])
    assert [p.error_code for t in response.topics for p in t.partitions] == [0, E.unknown_topic_id.value]
    assert response.topics[0].topic_id == tid
    ctx.commit("other", {T0: 1})
    fetch = opb.OffsetFetchRequest(api_version=10, require_stable=True)
    fetch.groups.add(group_id=G, all_topics=True)
    fetch.groups.add(group_id="other").topics.add(name="t", partition_indexes=[0])
    answer = ctx.answer(ctx.call("offset_fetch", fetch)[0])
    assert [g.group_id for g in answer.groups] == [G, "other"]
    assert answer.groups[0].topics[0].topic_id == tid
    assert answer.groups[0].topics[0].partitions[0].committed_offset == 9
    assert answer.groups[1].topics[0].partitions[0].committed_offset == 1


def test_offset_delete_rules() -> None:
    ctx = ShardContext()
    sub = encode_subscription(Subscription(["t"]))
    ids, gen = ctx.form_group(G, 1, protocols=[("range", sub)])
    ctx.commit(G, {T0: 1, ("u", 0): 2}, member_id=ids[0], generation=gen)
    request = opb.OffsetDeleteRequest(api_version=0, group_id=G)
    request.topics.add(name="t").partitions.add(partition_index=0)
    request.topics.add(name="u").partitions.add(partition_index=0)
    response = ctx.answer(ctx.call("offset_delete", request)[0])
    assert [p.error_code for t in response.topics for p in t.partitions] == [
        E.group_subscribed_to_topic.value,
        0,
    ]
    assert ctx.fetch(G) == {T0: 1}
    missing = opb.OffsetDeleteRequest(api_version=0, group_id="nobody")
    assert ctx.answer(ctx.call("offset_delete", missing)[0]).error_code == E.group_id_not_found.value
    ctx.assert_replay_equals_live()


def test_offset_delete_in_a_non_consumer_group_with_members_is_non_empty_group() -> None:
    ctx = ShardContext()
    ctx.form_group(G, 1, protocol_type="connect")
    request = opb.OffsetDeleteRequest(api_version=0, group_id=G)
    request.topics.add(name="t").partitions.add(partition_index=0)
    assert ctx.answer(ctx.call("offset_delete", request)[0]).error_code == E.non_empty_group.value


def test_offsets_of_an_empty_group_expire_after_retention_then_the_group_goes() -> None:
    config = GroupConfig(
        classic_group_initial_rebalance_delay_ms=0,
        offsets_retention_ms=60_000,
        offsets_retention_check_interval_ms=10_000,
    )
    ctx = ShardContext(config)
    ctx.apply(ctx.shard.on_loaded(ctx.clock.now_ms))
    ids, gen = ctx.form_group(G, 1, session_ms=10_000)
    ctx.commit(G, {T0: 1}, member_id=ids[0], generation=gen)
    ctx.leave(G, (ids[0], None))  # empty from now on
    emptied_at = ctx.clock.now_ms
    ctx.advance(50_000)
    assert ctx.fetch(G) == {T0: 1}
    ctx.advance(20_000)
    assert ctx.clock.now_ms - emptied_at >= 60_000
    assert G not in ctx.shard.groups
    assert ctx.shard.data.offsets.get(G, {}) == {}
    ctx.assert_replay_equals_live()


def test_a_group_expiring_whole_tombstones_each_offset_once() -> None:
    config = GroupConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10**9)
    ctx = ShardContext(config)
    ctx.commit(G, {T0: 1, ("t", 1): 2})  # a simple group: empty, offsets only
    expiry = ctx.shard.offset_manager.expire_offsets(ctx.clock.now_ms + 60_000)
    keys = [r.key.SerializeToString(deterministic=True) for r in expiry.records if r.value is None]
    assert len(keys) == len(set(keys))
    offsets = [r for r in expiry.records if type(r.key).__name__ == "OffsetCommitKey"]
    assert len(offsets) == 2
    ctx.apply(expiry)
    assert G not in ctx.shard.groups
    ctx.assert_replay_equals_live()


def test_stable_consumer_group_expires_only_topics_it_no_longer_subscribes_to() -> None:
    config = GroupConfig(
        classic_group_initial_rebalance_delay_ms=0,
        offsets_retention_ms=60_000,
        offsets_retention_check_interval_ms=10_000,
    )
    ctx = ShardContext(config)
    ctx.apply(ctx.shard.on_loaded(ctx.clock.now_ms))
    sub = encode_subscription(Subscription(["t"]))
    ids, gen = ctx.form_group(G, 1, protocols=[("range", sub)], session_ms=600_000)
    ctx.commit(G, {T0: 1, ("old", 0): 2}, member_id=ids[0], generation=gen)
    for _ in range(8):
        ctx.advance(10_000)
        ctx.heartbeat(G, ids[0], gen)
    assert ctx.fetch(G) == {T0: 1}
    assert isinstance(ctx.shard.groups[G], ClassicGroup)


def test_explicit_retention_time_of_v2_to_v4() -> None:
    config = GroupConfig(offsets_retention_ms=10**9, offsets_retention_check_interval_ms=1_000)
    ctx = ShardContext(config)
    ctx.apply(ctx.shard.on_loaded(ctx.clock.now_ms))
    ctx.commit(G, {T0: 1}, version=2, retention_ms=5_000)
    ctx.commit(G, {("t", 1): 1}, version=5, retention_ms=5_000)  # ignored from v5
    ctx.advance(5_000)
    assert ctx.fetch(G) == {("t", 1): 1}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 10**6), st.booleans()), max_size=30))
def test_last_successful_commit_wins_and_replay_equals_live(commits: list[tuple[int, int, bool]]) -> None:
    """Commits from a group member, some with a stale generation (rejected): every partition
    ends at the offset of its last accepted commit, live and replayed alike."""
    ctx = ShardContext()
    ids, gen = ctx.form_group(G, 1)
    expected: dict[tuple[str, int], int] = {}
    for partition, offset, stale in commits:
        codes = ctx.commit(
            G, {("t", partition): offset}, member_id=ids[0], generation=gen - 1 if stale else gen
        )
        if stale:
            assert codes == {("t", partition): E.illegal_generation.value}
        else:
            assert codes == {("t", partition): 0}
            expected[("t", partition)] = offset
    assert ctx.fetch(G) == expected
    ctx.assert_replay_equals_live()
    assert ctx.replayed().data.offsets.get(G, {}) == ctx.shard.data.offsets.get(G, {})


def test_v10_topic_ids_resolve_through_the_metadata_image() -> None:
    ctx = ShardContext()
    known = b"\x07" * 16
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([TopicImage(known, "orders", 4)]), 0))
    request = opb.OffsetCommitRequest(api_version=10, group_id=G, generation_id_or_member_epoch=-1)
    request.topics.add(topic_id=known).partitions.add(partition_index=3, committed_offset=11)
    request.topics.add(topic_id=b"\x08" * 16).partitions.add(partition_index=0, committed_offset=1)
    response = ctx.answer(ctx.call("offset_commit", request)[0])
    assert [p.error_code for t in response.topics for p in t.partitions] == [0, E.unknown_topic_id.value]
    assert ctx.fetch(G) == {("orders", 3): 11}
    fetch = opb.OffsetFetchRequest(api_version=10)
    fetch.groups.add(group_id=G).topics.add(topic_id=known, partition_indexes=[3])
    answer = ctx.answer(ctx.call("offset_fetch", fetch)[0])
    assert answer.groups[0].topics[0].partitions[0].committed_offset == 11


def test_a_deleted_topic_takes_every_groups_offsets_with_it() -> None:
    """Kafka's onPartitionsDeleted, as Kafka 4.4 answers after an AdminClient deleteTopics
    (tests/apache_kafka/test_deleted_topics.py): the deleted topic's offsets are tombstoned in
    every group, the other topics' stay; a topic recreated under its name (a new id) too."""
    ctx = ShardContext()
    doomed, kept = TopicImage(b"\x01" * 16, "doomed", 2), TopicImage(b"\x02" * 16, "kept", 1)
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([doomed, kept]), 0))
    for group in (G, "other"):
        ctx.commit(group, {("doomed", 0): 10, ("doomed", 1): 11, ("kept", 0): 3})
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([kept]), 0))
    for group in (G, "other"):
        assert ctx.fetch(group) == {("kept", 0): 3}
        assert ctx.fetch(group, [("doomed", 0)]) == {("doomed", 0): -1}
    ctx.assert_replay_equals_live()

    ctx.commit(G, {("kept", 0): 4})
    recreated = TopicImage(b"\x03" * 16, "kept", 1)
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([recreated]), 0))
    assert ctx.fetch(G) == {}
    # an unchanged image deletes nothing
    ctx.commit(G, {("kept", 0): 5})
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([recreated]), 0))
    assert ctx.fetch(G) == {("kept", 0): 5}
    ctx.assert_replay_equals_live()
