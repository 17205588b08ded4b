"""A group's adoption from the upstream's own coordinator (issue 40), as the shard decides it.

A platform team's application committed on the brokers' coordinator; its first touch through
the gateway asks the shard first (``check_only``), reads the upstream only for a group never
held here, then imports: once, as offset records, with the decision beside them.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from shard_test_context import ShardContext

from groupcoord.rpc.v1 import offsets_pb2 as opb

G = "billing"
Adoption = opb.AdoptGroupResponse


def adopt(
    ctx: ShardContext, offsets: dict[tuple[str, int], int] | None = None, **kw: object
) -> opb.AdoptGroupResponse:
    request = opb.AdoptGroupRequest(group_id=G, check_only=offsets is None, upstream_state="Empty", **kw)
    for (topic, partition), offset in (offsets or {}).items():
        request.offsets.add(topic=topic, partition=partition, offset=offset, leader_epoch=3, metadata="m")
    return ctx.answer(ctx.call("adopt_group", request)[0])


def test_a_group_never_held_needs_an_import_and_the_check_writes_nothing() -> None:
    ctx = ShardContext()
    assert adopt(ctx).adoption == Adoption.NEEDS_IMPORT
    assert ctx.log.records() == []


def test_imported_offsets_are_committed_offsets_and_the_group_is_ours_after() -> None:
    ctx = ShardContext()
    answer = adopt(ctx, {("orders", 0): 41, ("orders", 1): 7})
    assert (answer.adoption, answer.imported_offsets) == (Adoption.IMPORTED, 2)
    assert ctx.fetch(G) == {("orders", 0): 41, ("orders", 1): 7}
    committed = ctx.shard.data.offsets[G]["orders"][0]
    assert (committed.leader_epoch, committed.metadata) == (3, "m")
    # a second gateway's import of the same new group, a moment later: already ours
    assert adopt(ctx, {("orders", 0): 99}).adoption == Adoption.OURS
    assert adopt(ctx).adoption == Adoption.OURS
    assert ctx.fetch(G) == {("orders", 0): 41, ("orders", 1): 7}
    ctx.assert_replay_equals_live()


def test_a_group_with_state_here_is_held_and_never_imported() -> None:
    ctx = ShardContext()
    ctx.commit(G, {("orders", 0): 5})
    assert adopt(ctx).adoption == Adoption.OURS
    assert ctx.shard.data.adoptions[G].origin == 0  # HELD
    assert adopt(ctx, {("orders", 0): 41}).adoption == Adoption.OURS
    assert ctx.fetch(G) == {("orders", 0): 5}


def test_a_group_deleted_here_stays_decided() -> None:
    """The decision outlives the group: deleting it here does not bring the upstream's older
    offsets back on its next touch."""
    ctx = ShardContext()
    adopt(ctx, {("orders", 0): 41})
    from groupcoord.rpc.v1 import group_admin_pb2 as apb  # noqa: PLC0415

    deleted = ctx.answer(
        ctx.call("delete_groups", apb.DeleteGroupsRequest(api_version=2, groups_names=[G]))[0]
    )
    assert [r.error_code for r in deleted.results] == [0]
    assert ctx.fetch(G) == {}
    assert adopt(ctx).adoption == Adoption.OURS
    ctx.assert_replay_equals_live()


def test_an_upstream_group_without_offsets_is_decided_too() -> None:
    ctx = ShardContext()
    assert adopt(ctx, {}).adoption == Adoption.IMPORTED
    assert adopt(ctx).adoption == Adoption.OURS
    assert ctx.fetch(G) == {}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(-1, 10**9)), max_size=12),
    st.booleans(),
)
def test_replay_equals_live_and_the_last_named_offset_counts(
    named: list[tuple[str, int, int]], held_first: bool
) -> None:
    """Whatever the upstream answered (a partition twice, no offset: -1), the import keeps the
    last valid offset per partition, or nothing for a group already held; replay equals live."""
    ctx = ShardContext()
    if held_first:
        ctx.commit(G, {("held", 0): 1})
    request = opb.AdoptGroupRequest(group_id=G, upstream_state="Empty")
    for topic, partition, offset in named:
        request.offsets.add(topic=topic, partition=partition, offset=offset, leader_epoch=-1)
    answer = ctx.answer(ctx.call("adopt_group", request)[0])
    last = dict(((topic, partition), offset) for topic, partition, offset in named if offset >= 0)
    if held_first:
        assert answer.adoption == Adoption.OURS
        assert ctx.fetch(G) == {("held", 0): 1}
    else:
        assert answer.adoption == Adoption.IMPORTED
        assert ctx.fetch(G) == last
    ctx.assert_replay_equals_live()
