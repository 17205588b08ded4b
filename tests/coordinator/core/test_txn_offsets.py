"""Transactional offsets (TxnOffsetCommit): pending per producer, decided only by the upstream's
markers, applied in commit order as Kafka's OffsetMetadataManager does.

A marker is what the log reader makes of the upstream's control batch (TxnMarkerKey); the tests
append one where the upstream would write it, so replay sees pending records and markers in one
log, as after a failover.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E
from shard_test_context import ShardContext

from groupcoord.coordinator.core.contract import CoordinatorResult, deserialize_record, marker_record
from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage
from groupcoord.rpc.v1 import offsets_pb2 as opb

G = "group"
T0 = ("t", 0)
T1 = ("t", 1)
_marker_offsets = itertools.count(1_000_000)


def txn_commit(
    ctx: ShardContext,
    offsets: dict[tuple[str, int], int],
    *,
    producer_id: int = 7,
    producer_epoch: int = 0,
    group_id: str = G,
    member_id: str = "",
    generation: int = -1,
    instance_id: str | None = None,
    version: int = 3,
) -> tuple[dict[tuple[str, int], int], Any]:
    request = opb.TxnOffsetCommitRequest(
        api_version=version,
        transactional_id=f"tx-{producer_id}",
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id=generation,
        member_id=member_id,
    )
    if instance_id is not None:
        request.group_instance_id = instance_id
    ids = {} if version < 6 else {t.name: t.topic_id for t in ctx.shard.data.image.by_id.values()}
    for (topic, partition), offset in offsets.items():
        named = {"topic_id": ids.get(topic, b"\xee" * 16)} if version >= 6 else {"name": topic}
        key = next(iter(named.values()))
        t = next((t for t in request.topics if key in (t.name, t.topic_id)), None) or request.topics.add(**named)
        t.partitions.add(partition_index=partition, committed_offset=offset, committed_leader_epoch=-1)
    token, result = ctx.call("txn_offset_commit", request)
    response = ctx.answer(token)
    names = {topic_id: name for name, topic_id in ids.items()}
    codes = {
        (t.name or names.get(t.topic_id, "?"), p.partition_index): p.error_code
        for t in response.topics
        for p in t.partitions
    }
    return codes, result


def marker(ctx: ShardContext, producer_id: int, commit: bool, producer_epoch: int = 0) -> None:
    """The upstream's COMMIT/ABORT marker for the producer lands in the log."""
    record = marker_record(next(_marker_offsets), producer_id, producer_epoch, commit)
    ctx.apply(CoordinatorResult(records=[record]))
    ctx.apply(ctx.shard.after_markers(ctx.clock.now_ms))  # what the runtime does next


def fetch_stable(ctx: ShardContext, partitions: list[tuple[str, int]] | None = None) -> dict[Any, Any]:
    request = opb.OffsetFetchRequest(api_version=7, require_stable=True)
    g = request.groups.add(group_id=G, member_epoch=-1, all_topics=partitions is None)
    for topic, partition in partitions or []:
        t = next((t for t in g.topics if t.name == topic), None) or g.topics.add(name=topic)
        t.partition_indexes.append(partition)
    response = ctx.answer(ctx.call("offset_fetch", request)[0])
    (rg,) = response.groups
    return {
        (t.name, p.partition_index): (p.committed_offset, p.error_code)
        for t in rg.topics
        for p in t.partitions
    }


def assert_replay_equals_live(ctx: ShardContext) -> None:
    ctx.assert_replay_equals_live()
    fresh = ctx.replayed()
    assert fresh.data.transactions.open_by_key == ctx.shard.data.transactions.open_by_key
    assert fresh.data.transactions.sequences == ctx.shard.data.transactions.sequences


def test_pending_offsets_are_invisible_until_the_commit_marker() -> None:
    ctx = ShardContext()
    ctx.commit(G, {T0: 5})
    codes, result = txn_commit(ctx, {T0: 10, T1: 3})
    assert codes == {T0: 0, T1: 0}
    assert result.transaction is not None and result.transaction.producer_id == 7
    assert result.transaction.base_sequence == 0
    assert ctx.fetch(G, [T0, T1]) == {T0: 5, T1: -1}  # plain fetch: unchanged
    assert fetch_stable(ctx, [T0, T1]) == {
        T0: (-1, E.unstable_offset_commit.value),
        T1: (-1, E.unstable_offset_commit.value),
    }
    assert_replay_equals_live(ctx)  # pending survives a failover
    marker(ctx, 7, commit=True)
    assert ctx.fetch(G, [T0, T1]) == {T0: 10, T1: 3}
    assert fetch_stable(ctx, [T0, T1]) == {T0: (10, 0), T1: (3, 0)}
    assert ctx.shard.data.transactions.commits_applied == 1
    assert_replay_equals_live(ctx)


def test_abort_marker_discards_pending_offsets() -> None:
    ctx = ShardContext()
    ctx.commit(G, {T0: 5})
    txn_commit(ctx, {T0: 10})
    marker(ctx, 7, commit=False)
    assert ctx.fetch(G, [T0]) == {T0: 5}
    assert fetch_stable(ctx, [T0]) == {T0: (5, 0)}
    assert ctx.shard.data.transactions.aborts_applied == 1
    assert_replay_equals_live(ctx)


def test_a_marker_of_another_producer_decides_nothing() -> None:
    ctx = ShardContext()
    txn_commit(ctx, {T0: 10}, producer_id=7)
    marker(ctx, 8, commit=True)
    assert ctx.fetch(G, [T0]) == {T0: -1}
    assert fetch_stable(ctx, [T0]) == {T0: (-1, E.unstable_offset_commit.value)}


@pytest.mark.parametrize(
    ("sequence", "winner"),
    [
        # Kafka keeps the most recent commit by log position of the records, not by marker.
        (["txn", "plain", "commit"], 6),  # a plain commit after the txn's record wins
        (["plain", "txn", "commit"], 10),  # the txn's record is the later one
        (["txn", "commit", "plain"], 6),
    ],
)
def test_commit_order_between_transactional_and_plain_commits(sequence: list[str], winner: int) -> None:
    ctx = ShardContext()
    for step in sequence:
        if step == "txn":
            txn_commit(ctx, {T0: 10})
        elif step == "plain":
            ctx.commit(G, {T0: 6})
        else:
            marker(ctx, 7, commit=True)
    assert ctx.fetch(G, [T0]) == {T0: winner}
    assert_replay_equals_live(ctx)


def test_two_producers_commit_in_record_order_whatever_the_marker_order() -> None:
    ctx = ShardContext()
    txn_commit(ctx, {T0: 10}, producer_id=1)
    txn_commit(ctx, {T0: 20}, producer_id=2)
    marker(ctx, 2, commit=True)
    marker(ctx, 1, commit=True)  # older record: does not overwrite the newer one
    assert ctx.fetch(G, [T0]) == {T0: 20}
    assert_replay_equals_live(ctx)


def test_a_tombstone_drops_pending_offsets_of_its_partition() -> None:
    ctx = ShardContext()
    ctx.commit(G, {T0: 1})
    txn_commit(ctx, {T0: 10})
    ctx.call(
        "offset_delete",
        opb.OffsetDeleteRequest(group_id=G, topics=[{"name": "t", "partitions": [{"partition_index": 0}]}]),
    )
    assert fetch_stable(ctx, [T0]) == {T0: (-1, 0)}
    marker(ctx, 7, commit=True)
    assert ctx.fetch(G, [T0]) == {T0: -1}
    assert_replay_equals_live(ctx)


def test_sequences_continue_per_producer_epoch() -> None:
    ctx = ShardContext()
    _, r1 = txn_commit(ctx, {T0: 1, T1: 1})
    assert r1.transaction.base_sequence == 0
    marker(ctx, 7, commit=True)
    _, r2 = txn_commit(ctx, {T0: 2})
    assert r2.transaction.base_sequence == 2  # two records in the first batch
    _, r3 = txn_commit(ctx, {T0: 3}, producer_epoch=1)
    assert r3.transaction.base_sequence == 0  # a new epoch starts at 0
    codes, r4 = txn_commit(ctx, {T0: 4}, producer_epoch=0)  # the fenced epoch
    assert codes == {T0: E.invalid_producer_epoch.value} and not r4.records
    assert_replay_equals_live(ctx)


def test_a_newer_epoch_of_the_producer_drops_the_fenced_transactions_offsets() -> None:
    """Should the abort marker of a fenced transaction be missing, the first record of the
    producer's new epoch ends the old transaction all the same: its offsets are never applied."""
    ctx = ShardContext()
    txn_commit(ctx, {T0: 3, T1: 3}, producer_epoch=0)  # the fenced instance
    txn_commit(ctx, {T0: 7}, producer_epoch=1)  # the new instance, same transactional id
    assert fetch_stable(ctx, [T1]) == {T1: (-1, 0)}
    marker(ctx, 7, commit=True, producer_epoch=1)
    assert ctx.fetch(G, [T0, T1]) == {T0: 7, T1: -1}
    assert_replay_equals_live(ctx)


def test_a_marker_replayed_late_decides_only_offsets_written_before_it() -> None:
    """A leader replays the COMMIT of transaction 1 after it already replayed the producer's
    offsets of transaction 2 (same epoch, written after the marker in the log): the marker's
    sequence bound leaves them pending (the runtime's marker barrier keeps that rare: a
    producer's TxnOffsetCommit waits until the markers in the log are replayed)."""
    ctx = ShardContext()
    txn_commit(ctx, {T1: 1})  # transaction 1: sequence 0
    txn_commit(ctx, {T0: 2})  # transaction 2: sequence 1, after transaction 1's marker
    record = marker_record(next(_marker_offsets), 7, 0, True, sequence_bound=1)
    ctx.apply(CoordinatorResult(records=[record]))
    ctx.apply(ctx.shard.after_markers(ctx.clock.now_ms))
    assert fetch_stable(ctx, [T0, T1]) == {T0: (-1, E.unstable_offset_commit.value), T1: (1, 0)}
    marker(ctx, 7, commit=False)  # transaction 2 aborts: nothing of it was applied
    assert ctx.fetch(G, [T0, T1]) == {T0: -1, T1: 1}


def test_a_marker_decides_only_its_epoch_or_older() -> None:
    ctx = ShardContext()
    txn_commit(ctx, {T0: 7}, producer_epoch=2)
    marker(ctx, 7, commit=False, producer_epoch=1)  # a late marker of an older transaction
    assert fetch_stable(ctx, [T0]) == {T0: (-1, E.unstable_offset_commit.value)}
    marker(ctx, 7, commit=True, producer_epoch=2)
    assert ctx.fetch(G, [T0]) == {T0: 7}


def _classic_member(ctx: ShardContext) -> tuple[str, int]:
    ids, gen = ctx.form_group(G, 1)
    return ids[0], gen


# Kafka's validateTransactionalOffsetCommit, classic group.
@pytest.mark.parametrize(
    ("member", "generation", "expected"),
    [
        ("member", "gen", 0),
        ("member", "gen+1", E.illegal_generation.value),
        ("ghost", "gen", E.unknown_member_id.value),
        ("", -1, 0),  # a producer older than KIP-447 sends no member information
    ],
)
def test_classic_member_validation(member: str, generation: Any, expected: int) -> None:
    ctx = ShardContext()
    member_id, gen = _classic_member(ctx)
    mid = member_id if member == "member" else member
    g = {"gen": gen, "gen+1": gen + 1}.get(generation, generation)
    codes, _ = txn_commit(ctx, {T0: 1}, member_id=mid, generation=g)
    assert codes == {T0: expected}


def test_static_member_with_a_stale_member_id_is_fenced() -> None:
    ctx = ShardContext()
    token = ctx.join(G, instance_id="i", version=9)
    ctx.advance(0)
    old = ctx.answer(token)
    ctx.sync(G, old.member_id, old.generation_id, {old.member_id: b""}, instance_id="i")
    new = ctx.answer(ctx.join(G, instance_id="i", version=9))
    codes, _ = txn_commit(
        ctx, {T0: 1}, member_id=old.member_id, generation=new.generation_id, instance_id="i"
    )
    assert codes == {T0: E.fenced_instance_id.value}


def test_missing_group_with_a_generation_is_illegal_generation() -> None:
    ctx = ShardContext()
    codes, result = txn_commit(ctx, {T0: 1}, member_id="m", generation=3)
    assert codes == {T0: E.illegal_generation.value} and not result.records


def test_v6_names_topics_by_id_resolved_through_the_topics_image() -> None:
    """KIP-1319: a v6 commit names its topics by id; the offset is the named topic's, and an id
    the image does not have is UNKNOWN_TOPIC_ID (the other topics' offsets are written)."""
    ctx = ShardContext()
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([TopicImage(b"\x07" * 16, "t", 2)]), 0))
    codes, _ = txn_commit(ctx, {T0: 5, ("gone", 0): 1}, version=6)
    assert codes == {T0: E.none.value, ("?", 0): E.unknown_topic_id.value}
    marker(ctx, 7, commit=True, producer_epoch=1)  # transaction version 2: the bumped epoch
    assert fetch_stable(ctx) == {T0: (5, 0)}
    assert_replay_equals_live(ctx)


def test_retention_keeps_offsets_and_groups_with_open_transactions() -> None:
    ctx = ShardContext()
    ctx.commit(G, {T0: 1})
    txn_commit(ctx, {T0: 2})
    ctx.advance(ctx.config.offsets_retention_ms + ctx.config.offsets_retention_check_interval_ms)
    assert G in ctx.shard.groups
    assert ctx.fetch(G, [T0]) == {T0: 1}
    marker(ctx, 7, commit=True)
    assert ctx.fetch(G, [T0]) == {T0: 2}


# --- Transaction version 2 (KIP-890 part 2): the transaction coordinator bumps the producer's
# epoch as a transaction ends, and its markers carry the bumped epoch.

TV2 = 5  # TxnOffsetCommit v5: a client of transaction version 2


def test_a_version_2_commit_marker_carries_the_next_epoch_and_applies_the_transaction() -> None:
    """Transaction 1 at epoch 0 ends with a COMMIT of epoch 1; transaction 2 then runs at epoch
    1 (its sequences start again at 0) and ends with an ABORT of epoch 2."""
    ctx = ShardContext()
    _, r1 = txn_commit(ctx, {T0: 10, T1: 3}, version=TV2)
    assert r1.transaction.base_sequence == 0
    marker(ctx, 7, commit=True, producer_epoch=1)
    assert ctx.fetch(G, [T0, T1]) == {T0: 10, T1: 3}
    _, r2 = txn_commit(ctx, {T0: 20}, producer_epoch=1, version=TV2)
    assert r2.transaction.base_sequence == 0
    assert fetch_stable(ctx, [T0]) == {T0: (-1, E.unstable_offset_commit.value)}
    marker(ctx, 7, commit=False, producer_epoch=2)
    assert ctx.fetch(G, [T0, T1]) == {T0: 10, T1: 3}
    assert fetch_stable(ctx, [T0]) == {T0: (10, 0)}
    assert_replay_equals_live(ctx)


def test_a_version_2_transaction_is_not_ended_by_a_marker_of_its_own_epoch() -> None:
    """A marker of the transaction's own epoch is the marker of the transaction before it (its
    epoch was bumped to this one): it leaves the offsets pending."""
    ctx = ShardContext()
    txn_commit(ctx, {T0: 7}, producer_epoch=3, version=TV2)
    marker(ctx, 7, commit=True, producer_epoch=3)
    assert fetch_stable(ctx, [T0]) == {T0: (-1, E.unstable_offset_commit.value)}
    marker(ctx, 7, commit=True, producer_epoch=4)
    assert ctx.fetch(G, [T0]) == {T0: 7}


def test_a_version_2_transaction_fenced_by_a_newer_epoch_applies_nothing() -> None:
    """A new instance of the transactional id (InitProducerId bumps past the bumped epoch):
    the old transaction's ABORT comes with a newer epoch still, and a COMMIT of an epoch past
    the transaction's end is of another transaction: neither applies its offsets."""
    ctx = ShardContext()
    txn_commit(ctx, {T0: 3}, producer_epoch=0, version=TV2)
    marker(ctx, 7, commit=True, producer_epoch=2)  # ends at 1: a COMMIT of 2 is another's
    assert ctx.fetch(G, [T0]) == {T0: -1}
    assert fetch_stable(ctx, [T0]) == {T0: (-1, 0)}  # decided: aborted, nothing pending
    assert_replay_equals_live(ctx)


def _compacted_replay(ctx: ShardContext) -> Any:
    """Replay as the loader does: each key's last record only, in the order of those last
    occurrences (markers have unique keys and all survive)."""
    latest: dict[bytes, bytes | None] = {}
    for key, value in ctx.log.entries:
        latest.pop(key, None)
        latest[key] = value
    fresh = ShardContext(ctx.config)
    for key, value in latest.items():
        fresh.shard.replay(deserialize_record(key, value))
    return fresh.shard


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["txn", "txn-new-epoch", "plain", "commit", "abort", "delete"]),
            st.integers(1, 2),
            st.integers(0, 1),
        ),
        max_size=25,
    ),
    st.sampled_from([3, TV2]),
)
def test_replay_and_compacted_replay_equal_live(steps: list[tuple[str, int, int]], version: int) -> None:
    """Under either transaction version (a version 2 marker carries the next epoch)."""
    ctx = ShardContext()
    value = itertools.count(1)
    epochs = {1: 0, 2: 0}
    bump = 1 if version >= TV2 else 0
    for op, producer, partition in steps:
        tp = ("t", partition)
        if op == "txn-new-epoch":
            epochs[producer] += 1 + bump
        if op.startswith("txn"):
            txn_commit(
                ctx, {tp: next(value)}, producer_id=producer, producer_epoch=epochs[producer], version=version
            )
        elif op == "plain":
            ctx.commit(G, {tp: next(value)})
        elif op == "delete":
            ctx.call(
                "offset_delete",
                opb.OffsetDeleteRequest(
                    group_id=G, topics=[{"name": "t", "partitions": [{"partition_index": partition}]}]
                ),
            )
        else:
            marker(ctx, producer, commit=op == "commit", producer_epoch=epochs[producer] + bump)
            epochs[producer] += bump  # version 2: the next transaction runs at the bumped epoch
    assert_replay_equals_live(ctx)
    compacted = _compacted_replay(ctx)
    assert compacted.data.offsets == ctx.shard.data.offsets
    assert compacted.data.transactions.open_by_key == ctx.shard.data.transactions.open_by_key
    assert compacted.data.transactions.sequences == ctx.shard.data.transactions.sequences


# --- TxnOffsetCommit member validation, both group types (Kafka's validateTransactionalOffsetCommit)

# (case, world, member ("" = none; None = the world's member), epoch, instance id, classic, consumer)
TXN_CASES = [
    ("a member at its generation / epoch", "running", None, "current", None, E.none, E.none),
    # a stale KIP-848 member epoch is ILLEGAL_GENERATION here, not STALE_MEMBER_EPOCH
    ("a member one generation / epoch ahead", "running", None, "ahead", None, E.illegal_generation, None),
    ("an unknown member", "running", "ghost", "current", None, E.unknown_member_id, None),
    ("no member information (a pre-KIP-447 producer)", "running", "", -1, None, E.none, None),
    (
        "a member naming an unknown static instance",
        "running",
        None,
        "current",
        "ghost",
        E.unknown_member_id,
        E.none,
    ),
    ("a member of the emptied group", "empty", None, "current", None, E.unknown_member_id, None),
    ("a member of a missing group", "missing", "m1", 1, None, E.illegal_generation, None),
    ("no member information on a missing group", "missing", "", -1, None, E.none, None),
]


# TxnOffsetCommit v6 answers two of them as they are (KIP-1319), where older versions answer
# ILLEGAL_GENERATION: (case, classic at v6, consumer at v6)
V6_CASES = {
    "a member one generation / epoch ahead": (E.illegal_generation, E.stale_member_epoch),
    "a member of a missing group": (E.group_id_not_found, E.group_id_not_found),
}


@pytest.mark.parametrize("version", [5, 6])
@pytest.mark.parametrize("kind", ["classic", "consumer"])
@pytest.mark.parametrize(
    ("case", "world_name", "member", "epoch", "instance", "classic", "consumer"),
    TXN_CASES,
    ids=[c[0] for c in TXN_CASES],
)
def test_txn_offset_commit_member_validation(
    version: int,
    kind: str,
    case: str,
    world_name: str,
    member: str | None,
    epoch: Any,
    instance: str | None,
    classic: E,
    consumer: E | None,
) -> None:
    from test_offset_error_cases import WORLDS  # noqa: PLC0415 - the worlds of the OffsetCommit table

    world = WORLDS[world_name](kind)
    ctx = world.ctx
    generation = {"current": world.epoch, "ahead": world.epoch + 1}.get(epoch, epoch)
    expected = classic if kind == "classic" or consumer is None else consumer
    if version >= 6 and case in V6_CASES:
        expected = V6_CASES[case][kind == "consumer"]
    image = ctx.shard.data.image
    if version >= 6 and image.topic_id("t") is None:  # the classic worlds: a topic to name by id
        topics = [*image.by_id.values(), TopicImage(b"\x07" * 16, "t", 2)]
        ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of(topics), ctx.clock.now_ms))
    codes, result = txn_commit(
        ctx,
        {T0: 42},
        member_id=world.member if member is None else member,
        generation=generation,
        instance_id=instance,
        version=version,
    )
    assert codes == {T0: expected.value}, case
    assert bool(result.records) == (expected is E.none)
    assert_replay_equals_live(ctx)


def test_a_deleted_topic_clears_its_pending_offsets() -> None:
    """Kafka's onPartitionsDeleted drops pending transactional offsets with the committed ones:
    a COMMIT arriving after the deletion commits nothing for the deleted topic."""
    doomed = TopicImage(b"\x01" * 16, "t", 2)
    kept = TopicImage(b"\x02" * 16, "u", 1)
    ctx = ShardContext()
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([doomed, kept]), 0))
    assert txn_commit(ctx, {T0: 5, ("u", 0): 6})[0] == {T0: 0, ("u", 0): 0}
    ctx.apply(ctx.shard.on_metadata_update(TopicsImage.of([kept]), 0))
    marker(ctx, 7, commit=True)
    assert fetch_stable(ctx) == {("u", 0): (6, 0)}
    assert_replay_equals_live(ctx)
