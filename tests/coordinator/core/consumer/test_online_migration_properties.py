"""Property tests: random histories of a group migrating online, classic and KIP-848 clients mixed.

A classic group of simulated cooperative (KIP-429) clients is converted by a KIP-848 client's
first heartbeat; then classic and KIP-848 clients join, heartbeat, leave and crash at random
while the clock moves. After every step:

* the coordinator never has a partition with two members (assigned or pending revocation);
* no two clients the coordinator still knows hold the same partition, and each holds only
  what the coordinator has it holding;
* replaying every record written so far gives the live state.

Once the input stops, every live client converges on its target. The policy is "upgrade" so
the group stays a consumer group even when only classic members remain (the downgrade is
covered step by step in test_online_migration.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from consumer_group_context import ConsumerGroupContext, G
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E
from test_consumer_group_properties import Client, _run

from groupcoord.coordinator.core.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from groupcoord.coordinator.core.config import GroupConfig, MigrationPolicy
from groupcoord.coordinator.core.consumer.consumer_group import ConsumerGroup
from groupcoord.rpc.v1 import classic_group_pb2 as cpb
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

TICK_MS = 3_000
PARTITIONS = 6
CONVERGENCE_ROUNDS = 25


@dataclass
class ClassicClient:
    """A cooperative classic consumer: heartbeats; rejoins (reporting what it holds) when told
    to; after SyncGroup drops what it lost, takes what it got, and rejoins if it lost any."""

    name: str
    member_id: str = ""
    generation: int = -1
    held: set[int] = field(default_factory=set)
    must_join: bool = True
    alive: bool = True


class MigrationWorld:
    def __init__(self) -> None:
        self.ctx = ConsumerGroupContext(
            GroupConfig(
                classic_group_initial_rebalance_delay_ms=0,
                consumer_group_migration_policy=MigrationPolicy.UPGRADE,
            )
        )
        self.ctx.set_topics(foo=PARTITIONS)
        self.foo = self.ctx.topic_id("foo")
        self.classic: dict[int, ClassicClient] = {}
        self.consumers: dict[int, Client] = {}
        self.incarnation = 0

    # --- the classic group before the upgrade ----------------------------------------------------
    def form_classic_group(self, owners: list[int]) -> None:
        """Classic members 0..n-1 (n = max(owners) + 1), partition p held by owners[p]."""
        n = max(owners) + 1
        for slot in range(n):
            self.classic[slot] = ClassicClient(f"c{slot}")
        tokens = {}
        for c in self.classic.values():
            first = self._join(c, "")
            c.member_id = first.member_id
        for slot, c in self.classic.items():
            tokens[slot] = self.ctx.call("join_group", self._join_request(c))[0]
        self.ctx.advance(0)
        answers = {slot: self.ctx.answer(t) for slot, t in tokens.items()}
        leader = next(iter(answers.values())).leader
        generation = next(iter(answers.values())).generation_id
        plan = {
            c.member_id: encode_assignment(
                Assignment({"foo": [p for p, o in enumerate(owners) if o == slot]})
            )
            for slot, c in self.classic.items()
        }
        for c in self.classic.values():
            if c.member_id != leader:
                self.ctx.call("sync_group", self._sync_request(c, generation))
        leader_sync = self._sync_request(
            next(c for c in self.classic.values() if c.member_id == leader), generation
        )
        leader_sync.assignments.extend(
            cpb.SyncGroupAssignment(member_id=m, assignment=a) for m, a in plan.items()
        )
        self.ctx.call("sync_group", leader_sync)
        for slot, c in self.classic.items():
            c.generation, c.must_join = generation, False
            c.held = {p for p, o in enumerate(owners) if o == slot}

    # --- classic requests --------------------------------------------------------------------
    def _join_request(self, c: ClassicClient) -> cpb.JoinGroupRequest:
        sub = encode_subscription(
            Subscription(["foo"], owned_partitions={"foo": sorted(c.held)} if c.held else {})
        )
        return cpb.JoinGroupRequest(
            api_version=9,
            group_id=G,
            member_id=c.member_id,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000,
            protocol_type="consumer",
            protocols=[cpb.JoinGroupProtocol(name="cooperative-sticky", metadata=sub)],
            client_id=c.name,
            client_host="/127.0.0.1",
        )

    def _join(self, c: ClassicClient, member_id: str) -> cpb.JoinGroupResponse:
        request = self._join_request(c)
        request.member_id = member_id
        return self.ctx.answer(self.ctx.call("join_group", request)[0])  # type: ignore[no-any-return]

    def _sync_request(self, c: ClassicClient, generation: int) -> cpb.SyncGroupRequest:
        return cpb.SyncGroupRequest(
            api_version=5,
            group_id=G,
            member_id=c.member_id,
            generation_id=generation,
            protocol_type="consumer",
            protocol_name="cooperative-sticky",
        )

    def _reset(self, c: ClassicClient, forget_id: bool) -> None:
        """Lost its membership: drop every partition (on_partitions_lost) and join again."""
        c.held, c.generation, c.must_join = set(), -1, True
        if forget_id:
            c.member_id = ""

    def classic_act(self, c: ClassicClient) -> None:
        if not c.must_join:
            code = self.ctx.answer(
                self.ctx.call(
                    "heartbeat",
                    cpb.HeartbeatRequest(
                        api_version=4, group_id=G, member_id=c.member_id, generation_id=c.generation
                    ),
                )[0]
            ).error_code
            if code == E.rebalance_in_progress.value:
                c.must_join = True
            elif code in (E.unknown_member_id.value, E.illegal_generation.value):
                self._reset(c, forget_id=code == E.unknown_member_id.value)
            return
        joined = self._join(c, c.member_id)
        if joined.error_code == E.member_id_required.value:
            c.member_id = joined.member_id
            return
        if joined.error_code == E.unknown_member_id.value:
            self._reset(c, forget_id=True)
            return
        if joined.error_code != 0:
            return
        c.member_id = joined.member_id
        synced = self.ctx.answer(self.ctx.call("sync_group", self._sync_request(c, joined.generation_id))[0])
        if synced.error_code == E.rebalance_in_progress.value:
            return
        if synced.error_code != 0:
            self._reset(c, forget_id=synced.error_code == E.unknown_member_id.value)
            return
        assigned = set(decode_assignment(synced.assignment).partitions.get("foo", []))
        lost = c.held - assigned
        c.held, c.generation = assigned, joined.generation_id
        c.must_join = bool(lost)  # KIP-429: revoked something, so rejoin

    # --- KIP-848 requests --------------------------------------------------------------------
    def consumer_act(self, c: Client) -> None:
        response = self.ctx.answer(self.ctx.call("consumer_group_heartbeat", c.request())[0])
        c.on_response(response)

    # --- steps -------------------------------------------------------------------------------
    def step(self, op: tuple[str, int]) -> None:
        kind, slot = op
        if kind == "tick":
            self.tick()
        elif kind == "classic-join" and slot not in self.classic:
            self.classic[slot] = ClassicClient(f"c{slot}-{self.incarnation}")
            self.classic_act(self.classic[slot])
        elif kind == "consumer-join" and slot not in self.consumers:
            self.incarnation += 1
            self.consumers[slot] = Client(f"k{slot}-{self.incarnation}", None, ["foo"])
            self.consumer_act(self.consumers[slot])
        elif kind == "classic-leave" and slot in self.classic:
            c = self.classic.pop(slot)
            if c.member_id and c.alive:
                self.ctx.call(
                    "leave_group",
                    cpb.LeaveGroupRequest(
                        api_version=5, group_id=G, members=[cpb.LeaveGroupMember(member_id=c.member_id)]
                    ),
                )
        elif kind == "consumer-leave" and slot in self.consumers:
            c = self.consumers.pop(slot)
            if c.alive:
                self.ctx.call(
                    "consumer_group_heartbeat",
                    pb.ConsumerGroupHeartbeatRequest(
                        api_version=1, group_id=G, member_id=c.member_id, member_epoch=-1
                    ),
                )
        elif kind == "classic-crash" and slot in self.classic:
            self.classic[slot].alive = False
        elif kind == "consumer-crash" and slot in self.consumers:
            self.consumers[slot].alive = False

    def tick(self) -> None:
        self.ctx.advance(TICK_MS)
        for c in list(self.classic.values()):
            if c.alive:
                self.classic_act(c)
        for k in list(self.consumers.values()):
            if k.alive:
                self.consumer_act(k)

    # --- invariants --------------------------------------------------------------------------
    def check(self) -> None:
        group = self.ctx.shard.groups.get(G)
        held: dict[int, str] = {}
        members = group.members if isinstance(group, ConsumerGroup) else {}
        for m in members.values():
            for source in (m.assigned, m.pending_revocation):
                for p in source.get(self.foo, ()):
                    assert p not in held, f"foo-{p} held by {held[p]} and {m.member_id}"
                    held[p] = m.member_id
        for c in self.classic.values():
            if c.member_id in members and c.alive:
                for p in c.held:
                    assert held.get(p) == c.member_id, f"{c.member_id} holds foo-{p}"
        for k in self.consumers.values():
            if k.member_id in members and k.alive:
                for p in k.owned.get(self.foo, set()):
                    assert held.get(p) == k.member_id, f"{k.member_id} holds foo-{p}"
        self.ctx.assert_replay_equals_live()

    def converged(self) -> bool:
        group = self.ctx.shard.groups.get(G)
        if not isinstance(group, ConsumerGroup):
            return False
        if group.state_name() not in ("Stable", "Empty"):
            return False
        live_ids = {c.member_id for c in self.classic.values() if c.alive} | {
            k.member_id for k in self.consumers.values() if k.alive
        }
        if set(group.members) != live_ids:
            return False
        for c in self.classic.values():
            if c.alive and (
                c.must_join or c.held != set(group.target.get(c.member_id, {}).get(self.foo, ()))
            ):
                return False
        for k in self.consumers.values():
            held = k.received if k.received is not None else k.owned
            if k.alive and set(held.get(self.foo, ())) != set(
                group.target.get(k.member_id, {}).get(self.foo, ())
            ):
                return False
        covered = {p for t in group.target.values() for p in t.get(self.foo, ())}
        return not live_ids or covered == set(range(PARTITIONS))


OPS = st.one_of(
    st.tuples(
        st.sampled_from(
            [
                "classic-join",
                "consumer-join",
                "classic-leave",
                "consumer-leave",
                "classic-crash",
                "consumer-crash",
            ]
        ),
        st.integers(0, 3),
    ),
    st.tuples(st.just("tick"), st.just(0)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    owners=st.lists(st.integers(0, 2), min_size=PARTITIONS, max_size=PARTITIONS),
    ops=st.lists(OPS, min_size=3, max_size=30),
)
def test_mixed_protocol_histories_are_safe_replayable_and_converge(
    owners: list[int], ops: list[tuple[str, int]]
) -> None:
    world = MigrationWorld()
    world.form_classic_group(owners)
    world.check()
    # A KIP-848 client's first heartbeat converts the group.
    world.step(("consumer-join", 9))
    assert isinstance(world.ctx.shard.groups[G], ConsumerGroup)
    world.check()
    _run(world, ops, CONVERGENCE_ROUNDS)  # type: ignore[arg-type]  # same step/check/tick/converged
