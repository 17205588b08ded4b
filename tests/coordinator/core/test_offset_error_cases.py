"""Every error case Apache Kafka's coordinator tests assert on the offset paths, as one table
per API, each row run against a classic group and a consumer (KIP-848) group.

The rows follow OffsetMetadataManagerTest (commit validation by generation / member epoch,
admin commits, static members, API versions, fetch validation, OffsetDelete per partition,
retention and expiry) and GroupMetadataManagerTest's DeleteGroups cases. Topic existence is
checked before the coordinator, by the gateway (tests/gateway/groups/test_topic_catalog.py and
tests/e2e/test_offset_admin.py), as Kafka's request handler does.

Each world is a group ``G`` with one member subscribed to topic ``t`` that committed offsets for
``t`` and for ``u`` (a topic it does not subscribe to): "running" keeps the member, "empty" is
the same group after the member left, "missing" has no group at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from consumer_group_context import ConsumerGroupContext
from kio.schema.errors import ErrorCode as E
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.consumer_protocol import Subscription, encode_subscription
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.rpc.v1 import group_admin_pb2 as gpb
from groupcoord.rpc.v1 import offsets_pb2 as opb

G = "group"
T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)
COMMITTED = {T0: 5, T1: 6, U0: 7}
RETENTION_MS = 60_000
KINDS = ["classic", "consumer"]


@dataclass
class World:
    ctx: ShardContext
    kind: str
    member: str  # the (former) member's id
    epoch: int  # its generation (classic) or member epoch (consumer)


def running(kind: str) -> World:
    config = GroupConfig(
        classic_group_initial_rebalance_delay_ms=0,
        offsets_retention_ms=RETENTION_MS,
        offsets_retention_check_interval_ms=10_000,
    )
    # a classic group is driven through JoinGroup/SyncGroup (ShardContext), a consumer group
    # through KIP-848 heartbeats over a topics image (ConsumerGroupContext)
    ctx = ShardContext(config) if kind == "classic" else ConsumerGroupContext(config)
    if isinstance(ctx, ConsumerGroupContext):
        ctx.set_topics(t=2, u=1)
    ctx.apply(ctx.shard.on_loaded(ctx.clock.now_ms))
    if kind == "classic":
        sub = encode_subscription(Subscription(["t"]))
        ids, generation = ctx.form_group(G, 1, protocols=[("range", sub)], session_ms=600_000)
        world = World(ctx, kind, ids[0], generation)
    else:
        joined = ctx.join("m1", names=["t"])
        world = World(ctx, kind, "m1", joined.member_epoch)
    assert ctx.commit(G, COMMITTED, member_id=world.member, generation=world.epoch) == dict.fromkeys(
        COMMITTED, 0
    )
    return world


def empty(kind: str) -> World:
    world = running(kind)
    if kind == "classic":
        world.ctx.leave(G, (world.member, None))
    else:
        assert isinstance(world.ctx, ConsumerGroupContext)
        world.ctx.heartbeat(world.member, -1)
    assert world.ctx.shard.groups[G].is_empty()
    return world


def missing(kind: str) -> World:
    world = running(kind)
    world.ctx.answer(
        world.ctx.call("delete_groups", gpb.DeleteGroupsRequest(api_version=2, groups_names=[]))[0]
    )
    fresh = ConsumerGroupContext()
    fresh.set_topics(t=2, u=1)
    return World(fresh, kind, "m1", 1)


WORLDS: dict[str, Callable[[str], World]] = {"running": running, "empty": empty, "missing": missing}
CURRENT, AHEAD = "current", "ahead"  # the member's own epoch, or one past it


def per_kind(classic: E, consumer: E | None = None) -> dict[str, E]:
    return {"classic": classic, "consumer": consumer if consumer is not None else classic}


# --- OffsetCommit ------------------------------------------------------------------------------

# (case, world, member ("" = admin; None = the world's member), epoch, version, instance id, error)
COMMIT_CASES = [
    ("a member at its generation / epoch", "running", None, CURRENT, 9, None, per_kind(E.none)),
    (
        "a member one generation / epoch ahead",
        "running",
        None,
        AHEAD,
        9,
        None,
        per_kind(E.illegal_generation, E.stale_member_epoch),
    ),
    ("an unknown member", "running", "ghost", CURRENT, 9, None, per_kind(E.unknown_member_id)),
    (
        "the admin client while the group has members",
        "running",
        "",
        -1,
        9,
        None,
        per_kind(E.unknown_member_id),
    ),
    ("the admin client on the empty group", "empty", "", -1, 9, None, per_kind(E.none)),
    ("a member of the emptied group", "empty", None, CURRENT, 9, None, per_kind(E.unknown_member_id)),
    # a classic group validates the static instance; a consumer group only member id and epoch
    (
        "a member naming an unknown static instance",
        "running",
        None,
        CURRENT,
        9,
        "ghost-instance",
        per_kind(E.unknown_member_id, E.none),
    ),
    # KIP-848 members must commit with OffsetCommit v9+ (classic members: any version)
    (
        "a member committing with OffsetCommit v8",
        "running",
        None,
        CURRENT,
        8,
        None,
        per_kind(E.none, E.unsupported_version),
    ),
    ("a member of a missing group (v9+)", "missing", "m1", 1, 9, None, per_kind(E.group_id_not_found)),
    ("a member of a missing group (v8)", "missing", "m1", 1, 8, None, per_kind(E.illegal_generation)),
    ("the admin client on a missing group", "missing", "", -1, 9, None, per_kind(E.none)),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("case", "world_name", "member", "epoch", "version", "instance", "expected"),
    COMMIT_CASES,
    ids=[c[0] for c in COMMIT_CASES],
)
def test_offset_commit(
    kind: str,
    case: str,
    world_name: str,
    member: str | None,
    epoch: int | str,
    version: int,
    instance: str | None,
    expected: dict[str, E],
) -> None:
    world = WORLDS[world_name](kind)
    ctx = world.ctx
    generation = world.epoch if epoch == CURRENT else world.epoch + 1 if epoch == AHEAD else int(epoch)
    before = ctx.fetch(G, [T0]) if G in ctx.shard.groups else {T0: -1}

    answer = ctx.commit(
        G,
        {T0: 42},
        member_id=world.member if member is None else member,
        generation=generation,
        instance_id=instance,
        version=version,
    )

    assert answer == {T0: expected[kind].value}, case
    stored = ctx.fetch(G, [T0]) if G in ctx.shard.groups else {T0: -1}
    assert stored == ({T0: 42} if expected[kind] is E.none else before)
    ctx.assert_replay_equals_live()


def test_offset_metadata_larger_than_the_limit_is_refused_per_partition() -> None:
    for kind in KINDS:
        world = running(kind)
        world.ctx.shard.offset_manager.config = GroupConfig(offset_metadata_max_bytes=4)
        answer = world.ctx.commit(
            G, {T0: 1, T1: 1}, member_id=world.member, generation=world.epoch, metadata="12345"
        )
        assert answer == {T0: E.offset_metadata_too_large.value, T1: E.offset_metadata_too_large.value}


# --- OffsetFetch -------------------------------------------------------------------------------

# (case, world, member id (None = none given), epoch, error). Classic members fetch without
# member validation (only KIP-848 members send an epoch).
FETCH_CASES = [
    ("the admin client", "running", None, -1, per_kind(E.none)),
    ("a member at its epoch", "running", "self", CURRENT, per_kind(E.none)),
    ("a member one epoch ahead", "running", "self", AHEAD, per_kind(E.none, E.stale_member_epoch)),
    ("an unknown member", "running", "ghost", CURRENT, per_kind(E.none, E.unknown_member_id)),
    ("the admin client on a missing group", "missing", None, -1, per_kind(E.none)),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("case", "world_name", "member", "epoch", "expected"), FETCH_CASES, ids=[c[0] for c in FETCH_CASES]
)
@pytest.mark.parametrize("require_stable", [False, True])
def test_offset_fetch(
    kind: str,
    case: str,
    world_name: str,
    member: str | None,
    epoch: int | str,
    expected: dict[str, E],
    require_stable: bool,
) -> None:
    world = WORLDS[world_name](kind)
    request = opb.OffsetFetchRequest(api_version=9, require_stable=require_stable)
    group = request.groups.add(group_id=G)
    if member is not None:
        group.member_id = world.member if member == "self" else member
    group.member_epoch = (
        world.epoch if epoch == CURRENT else world.epoch + 1 if epoch == AHEAD else int(epoch)
    )
    group.topics.add(name="t", partition_indexes=[0, 1, 9])

    (answer,) = world.ctx.answer(world.ctx.call("offset_fetch", request)[0]).groups

    assert answer.error_code == expected[kind].value, case
    if expected[kind] is E.none:
        # no transactional offsets are ever pending here, so require_stable changes nothing
        offsets = {
            (t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in answer.topics
            for p in t.partitions
        }
        known = world_name != "missing"
        assert offsets == {T0: (5 if known else -1, 0), T1: (6 if known else -1, 0), ("t", 9): (-1, 0)}


# --- OffsetDelete ------------------------------------------------------------------------------

# (case, world, topics to delete, group-level error, per-partition errors, offsets left)
DELETE_CASES = [
    (
        "a subscribed and an unsubscribed topic of the running group",
        "running",
        [T0, T1, U0],
        E.none,
        {T0: E.group_subscribed_to_topic, T1: E.group_subscribed_to_topic, U0: E.none},
        {T0: 5, T1: 6},
    ),
    ("every topic of the empty group", "empty", [T0, U0], E.none, {T0: E.none, U0: E.none}, {T1: 6}),
    ("a partition never committed", "empty", [("u", 3)], E.none, {("u", 3): E.none}, COMMITTED),
    ("a missing group", "missing", [T0], E.group_id_not_found, {}, {}),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("case", "world_name", "partitions", "group_error", "errors", "left"),
    DELETE_CASES,
    ids=[c[0] for c in DELETE_CASES],
)
def test_offset_delete(
    kind: str,
    case: str,
    world_name: str,
    partitions: list[tuple[str, int]],
    group_error: E,
    errors: dict[tuple[str, int], E],
    left: dict[tuple[str, int], int],
) -> None:
    world = WORLDS[world_name](kind)
    ctx = world.ctx
    request = opb.OffsetDeleteRequest(api_version=0, group_id=G)
    for topic in dict.fromkeys(t for t, _ in partitions):
        rt = request.topics.add(name=topic)
        for t, p in partitions:
            if t == topic:
                rt.partitions.add(partition_index=p)

    answer = ctx.answer(ctx.call("offset_delete", request)[0])

    assert answer.error_code == group_error.value, case
    echoed = {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}
    assert echoed == {tp: e.value for tp, e in errors.items()}
    assert (ctx.fetch(G) if G in ctx.shard.groups else {}) == left
    ctx.assert_replay_equals_live()


def test_offset_delete_of_a_classic_group_of_another_protocol_type_with_members_is_non_empty() -> None:
    ctx = ShardContext()
    ctx.form_group(G, 1, protocol_type="connect")
    request = opb.OffsetDeleteRequest(api_version=0, group_id=G)
    request.topics.add(name="t").partitions.add(partition_index=0)
    assert ctx.answer(ctx.call("offset_delete", request)[0]).error_code == E.non_empty_group.value


# --- DeleteGroups ------------------------------------------------------------------------------

DELETE_GROUP_CASES = [
    ("the running group", "running", E.non_empty_group),
    ("the empty group", "empty", E.none),
    ("a missing group", "missing", E.group_id_not_found),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("case", "world_name", "expected"), DELETE_GROUP_CASES, ids=[c[0] for c in DELETE_GROUP_CASES]
)
def test_delete_groups(kind: str, case: str, world_name: str, expected: E) -> None:
    world = WORLDS[world_name](kind)
    ctx = world.ctx
    request = gpb.DeleteGroupsRequest(api_version=2, groups_names=[G])

    (result,) = ctx.answer(ctx.call("delete_groups", request)[0]).results

    assert result.error_code == expected.value, case
    if world_name == "running":
        assert ctx.fetch(G) == COMMITTED  # nothing deleted
    else:
        assert G not in ctx.shard.groups and ctx.shard.data.offsets.get(G, {}) == {}
    ctx.assert_replay_equals_live()


# --- retention and expiry ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_running_group_keeps_subscribed_offsets_and_expires_the_others(kind: str) -> None:
    world = running(kind)
    ctx = world.ctx
    for _ in range(8):  # retention passes while the member keeps heartbeating
        ctx.advance(10_000)
        if isinstance(ctx, ConsumerGroupContext):
            ctx.ack(world.member)
        else:
            ctx.heartbeat(G, world.member, world.epoch)
    assert ctx.fetch(G) == {T0: 5, T1: 6}
    ctx.assert_replay_equals_live()


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_group_expires_whole_after_retention(kind: str) -> None:
    world = empty(kind)
    ctx = world.ctx
    ctx.advance(RETENTION_MS - 20_000)
    assert ctx.fetch(G) == COMMITTED
    ctx.advance(30_000)
    assert G not in ctx.shard.groups and ctx.shard.data.offsets.get(G, {}) == {}
    ctx.assert_replay_equals_live()
