"""Static membership (KIP-345) and cooperative rebalancing (KIP-429) through the classic core."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E
from shard_test_context import ShardContext

from groupcoord.coordinator.core.classic.classic_group import ClassicGroupState as S
from groupcoord.coordinator.core.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

G = "group"


def _static_group(ctx: ShardContext, n: int, version: int = 9) -> tuple[list[str], int]:
    tokens = [ctx.join(G, instance_id=f"i-{k}", version=version, session_ms=10_000) for k in range(n)]
    ctx.advance(0)
    responses = [ctx.answer(t) for t in tokens]
    ids = [r.member_id for r in responses]
    gen = responses[0].generation_id
    for m in ids[1:]:
        ctx.sync(G, m, gen, instance_id=f"i-{ids.index(m)}")
    ctx.sync(G, ids[0], gen, {m: f"A{k}".encode() for k, m in enumerate(ids)}, instance_id="i-0")
    assert ctx.classic(G).state is S.STABLE
    return ids, gen


def test_static_member_restarting_within_session_timeout_keeps_its_assignment() -> None:
    ctx = ShardContext()
    ids, gen = _static_group(ctx, 3)
    ctx.advance(5_000)  # member i-1 restarts: new process, no member id, same instance id
    rejoin = ctx.answer(ctx.join(G, instance_id="i-1", version=9, session_ms=10_000))
    assert rejoin.error_code == 0
    assert rejoin.member_id != ids[1]
    assert rejoin.generation_id == gen  # no rebalance
    assert not rejoin.skip_assignment and rejoin.members == []
    group = ctx.classic(G)
    assert group.state is S.STABLE
    assert ctx.answer(ctx.sync(G, rejoin.member_id, gen, instance_id="i-1")).assignment == b"A1"
    # The old incarnation is fenced.
    assert ctx.heartbeat(G, ids[1], gen, instance_id="i-1") == E.fenced_instance_id.value
    assert ctx.answer(ctx.join(G, ids[1], instance_id="i-1")).error_code == E.fenced_instance_id.value
    assert ctx.answer(ctx.sync(G, ids[1], gen, instance_id="i-1")).error_code == E.fenced_instance_id.value
    ctx.assert_replay_equals_live()


def test_static_leader_rejoining_skips_assignment_on_v9() -> None:
    ctx = ShardContext()
    ids, gen = _static_group(ctx, 2)
    rejoin = ctx.answer(ctx.join(G, instance_id="i-0", version=9, session_ms=10_000))
    assert rejoin.skip_assignment
    assert rejoin.leader == rejoin.member_id
    assert {m.group_instance_id for m in rejoin.members} == {"i-0", "i-1"}
    assert ctx.classic(G).leader_id == rejoin.member_id


def test_static_leader_rejoining_below_v9_gets_no_member_list() -> None:
    ctx = ShardContext()
    _static_group(ctx, 2, version=5)
    rejoin = ctx.answer(ctx.join(G, instance_id="i-0", version=5, session_ms=10_000))
    assert rejoin.error_code == 0 and not rejoin.skip_assignment and rejoin.members == []


def test_static_member_with_changed_protocol_triggers_a_rebalance() -> None:
    ctx = ShardContext()
    ids, gen = _static_group(ctx, 2)
    token = ctx.join(G, instance_id="i-1", protocols=[("roundrobin", b""), ("range", b"")], session_ms=10_000)
    # Still "range" is the only common protocol: no rebalance.
    assert ctx.answer(token).generation_id == gen
    ctx.join(G, instance_id="i-0", protocols=[("roundrobin", b""), ("range", b"")], session_ms=10_000)
    assert ctx.classic(G).state is S.PREPARING_REBALANCE  # roundrobin now wins the vote


def test_static_member_gone_past_session_timeout_is_removed() -> None:
    ctx = ShardContext()
    ids, gen = _static_group(ctx, 2)
    for _ in range(3):
        ctx.advance(6_000)
        ctx.heartbeat(G, ids[0], gen, instance_id="i-0")
    group = ctx.classic(G)
    assert list(group.members) == [ids[0]]
    assert "i-1" not in group.static_members
    assert group.state is S.PREPARING_REBALANCE
    ctx.assert_replay_equals_live()


def test_static_member_with_known_id_but_other_instance_is_fenced() -> None:
    ctx = ShardContext()
    ids, gen = _static_group(ctx, 2)
    assert ctx.answer(ctx.join(G, ids[0], instance_id="i-1")).error_code == E.fenced_instance_id.value
    assert ctx.answer(ctx.join(G, ids[0], instance_id="i-9")).error_code == E.unknown_member_id.value


# --- cooperative rebalancing (KIP-429) -------------------------------------------------------

TOPICS = {"t1": 4, "t2": 3}
PROTOCOL = "cooperative-sticky"


@dataclass
class CooperativeConsumer:
    """A client following KIP-429: reports owned partitions, gives up only revoked ones."""

    member_id: str = ""
    owned: set[tuple[str, int]] = field(default_factory=set)
    sent: bytes = b""  # the subscription of the last JoinGroup

    def metadata(self) -> bytes:
        owned: dict[str, list[int]] = {}
        for t, p in sorted(self.owned):
            owned.setdefault(t, []).append(p)
        return encode_subscription(Subscription(sorted(TOPICS), owned_partitions=owned))


def cooperative_assign(subscriptions: dict[str, bytes]) -> dict[str, bytes]:
    """The leader's assignor: sticky and balanced, but a partition still owned by another
    member is withheld this round (its owner revokes first; a follow-up rebalance moves it)."""
    owned: dict[str, set[tuple[str, int]]] = {}
    for m, meta in subscriptions.items():
        sub = decode_subscription(meta)
        owned[m] = {(t, p) for t, ps in sub.owned_partitions.items() for p in ps}
    members = sorted(subscriptions)
    parts = sorted((t, p) for t, n in TOPICS.items() for p in range(n))
    quota = {
        m: len(parts) // len(members) + (1 if i < len(parts) % len(members) else 0)
        for i, m in enumerate(members)
    }
    target: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    taken: set[tuple[str, int]] = set()
    for m in members:
        for tp in sorted(owned[m]):
            if len(target[m]) < quota[m] and tp not in taken:
                target[m].add(tp)
                taken.add(tp)
    free = [tp for tp in parts if tp not in taken]
    for m in members:
        while len(target[m]) < quota[m] and free:
            target[m].add(free.pop(0))
    out = {}
    for m in members:
        others = set().union(*(owned[n] for n in members if n != m))
        mine = sorted(target[m] - others)
        parts_by_topic: dict[str, list[int]] = {}
        for t, p in mine:
            parts_by_topic.setdefault(t, []).append(p)
        out[m] = encode_assignment(Assignment(parts_by_topic))
    return out


def _assert_no_partition_owned_twice(consumers: list[CooperativeConsumer]) -> None:
    seen: set[tuple[str, int]] = set()
    for c in consumers:
        assert not (c.owned & seen), f"{c.member_id} owns partitions another member owns"
        seen |= c.owned


def _rebalance_until_settled(ctx: ShardContext, consumers: list[CooperativeConsumer]) -> int:
    """Drive joins and syncs until no member has anything left to revoke; returns rounds."""
    for rounds in range(1, 10):
        tokens = {}
        # Whoever has news joins first (a newcomer, or a member that revoked partitions): that
        # starts the rebalance; the others then rejoin too, as they would on learning of it
        # from a heartbeat's REBALANCE_IN_PROGRESS.
        for c in sorted(consumers, key=lambda c: (bool(c.member_id), c.metadata() == c.sent)):
            if not c.member_id:
                c.member_id = ctx.answer(
                    ctx.join(G, version=9, protocols=[(PROTOCOL, c.metadata())])
                ).member_id
            c.sent = c.metadata()
            tokens[c.member_id] = ctx.join(G, c.member_id, protocols=[(PROTOCOL, c.sent)])
        ctx.advance(0)
        answers = {m: ctx.answer(t) for m, t in tokens.items()}
        assert all(a is not None and a.error_code == 0 for a in answers.values()), answers
        gen = next(iter(answers.values())).generation_id
        leader = next(a for a in answers.values() if a.members)
        # Followers sync first (they wait), then the leader.
        syncs = {m: ctx.sync(G, m, gen) for m in answers if m != leader.member_id}
        plan = cooperative_assign({m.member_id: m.metadata for m in leader.members})
        syncs[leader.member_id] = ctx.sync(G, leader.member_id, gen, plan)
        revoked_any = False
        for c in consumers:  # each consumer applies its answer; the invariant holds throughout
            assignment = decode_assignment(ctx.answer(syncs[c.member_id]).assignment)
            new = {(t, p) for t, ps in assignment.partitions.items() for p in ps}
            revoked_any |= bool(c.owned - new)
            c.owned = new
            _assert_no_partition_owned_twice(consumers)
        if not revoked_any:
            return rounds
    raise AssertionError("cooperative rebalancing did not settle")


def test_cooperative_rebalance_moves_partitions_in_two_rounds() -> None:
    ctx = ShardContext()
    consumers = [CooperativeConsumer()]
    assert _rebalance_until_settled(ctx, consumers) == 1
    assert len(consumers[0].owned) == 7
    consumers.append(CooperativeConsumer())
    # The newcomer gets partitions only after the first member revoked them: a follow-up round.
    assert _rebalance_until_settled(ctx, consumers) == 2
    assert sorted(len(c.owned) for c in consumers) == [3, 4]
    ctx.assert_replay_equals_live()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["join", "leave"]), min_size=1, max_size=6))
def test_no_partition_is_owned_by_two_members_across_rebalances(events: list[str]) -> None:
    ctx = ShardContext()
    consumers = [CooperativeConsumer()]
    _rebalance_until_settled(ctx, consumers)
    for event in events:
        if event == "join" or len(consumers) == 1:
            consumers.append(CooperativeConsumer())
        else:
            gone = consumers.pop(0)
            ctx.leave(G, (gone.member_id, None))
        _rebalance_until_settled(ctx, consumers)
        owned = [tp for c in consumers for tp in c.owned]
        assert len(owned) == len(set(owned)) == sum(TOPICS.values())
    ctx.assert_replay_equals_live()
