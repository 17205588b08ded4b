"""Property tests: random histories of a consumer group against simulated KIP-848 clients.

Each history mixes joins, heartbeats, lost and duplicated responses, leaves, static bounces
(leave with -2, rejoin under a new member id), crashes (a member that stops heartbeating and
expires), partition count changes and topic recreation (same name, new id), with the clock
moving in heartbeat-interval ticks. After every step:

* the coordinator never has a partition with two members (assigned or pending revocation),
  nor a target for a member it does not have;
* no two clients the coordinator still knows hold the same partition, and each holds only
  what the coordinator has it holding;
* replaying every record written so far into an empty shard gives the live state.

Once the input stops, every live client converges: within a bounded number of heartbeat
rounds the group is Stable and each client owns exactly its target at the group epoch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from consumer_group_context import ConsumerGroupContext, G
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

TICK_MS = 5_000
CONVERGENCE_ROUNDS = 20


# Subscriptions by client slot: names, a regex, and a narrower one (heterogeneous groups).
SUBSCRIPTIONS: dict[int, tuple[list[str] | None, str | None]] = {
    0: (["foo", "bar"], None),
    1: (None, "fo.*"),
    2: (["foo", "bar"], None),
    3: (["bar"], None),
    4: (None, "(foo|bar)"),
}


@dataclass
class Client:
    member_id: str
    instance_id: str | None
    names: list[str] | None = None
    regex: str | None = None
    assignor: str | None = None
    epoch: int = 0
    # What the client holds, and the last assignment it received: like the clients, it gives
    # up revoked partitions (and starts on new ones) between two heartbeats, not at once.
    owned: dict[bytes, set[int]] = field(default_factory=dict)
    received: dict[bytes, set[int]] | None = None
    alive: bool = True
    # After a request error (a lost response is a timeout to the client), the next heartbeat
    # is a full one (every field set), which the coordinator answers with the assignment.
    full_next: bool = False

    def request(self) -> pb.ConsumerGroupHeartbeatRequest:
        if self.received is not None:
            self.owned, self.received = self.received, None
        r = pb.ConsumerGroupHeartbeatRequest(api_version=1, group_id=G, member_id=self.member_id)
        r.member_epoch = self.epoch
        r.topic_partitions.SetInParent()
        if self.epoch == 0 or self.full_next:
            r.rebalance_timeout_ms = 60_000
            if self.names is not None:
                r.subscribed_topic_names.SetInParent()
                r.subscribed_topic_names.names.extend(self.names)
            if self.regex is not None:
                r.subscribed_topic_regex = self.regex
            if self.assignor is not None:
                r.server_assignor = self.assignor
        else:
            r.rebalance_timeout_ms = -1
        if self.epoch != 0:
            for tid in sorted(self.owned):
                if self.owned[tid]:
                    r.topic_partitions.topic_partitions.add(topic_id=tid, partitions=sorted(self.owned[tid]))
        if self.instance_id is not None:
            r.instance_id = self.instance_id
        return r

    def on_response(self, resp: pb.ConsumerGroupHeartbeatResponse) -> None:
        if resp.error_code in (E.fenced_member_epoch.value, E.unknown_member_id.value):
            # Like the clients: drop every partition and rejoin with the same member id.
            self.epoch, self.owned, self.received = 0, {}, None
        elif resp.error_code == 0:
            self.epoch, self.full_next = resp.member_epoch, False
            if resp.HasField("assignment"):
                self.received = {tp.topic_id: set(tp.partitions) for tp in resp.assignment.topic_partitions}


class World:
    def __init__(
        self, config: GroupConfig | None = None, mixed: bool = False, assignor: str | None = None
    ) -> None:
        self.ctx = ConsumerGroupContext(config)
        self.mixed = mixed
        self.assignor = assignor
        self.ctx.set_topics(foo=4, bar=2)
        self.clients: dict[int, Client] = {}
        self.incarnation = 0

    def send(
        self, client: Client, request: pb.ConsumerGroupHeartbeatRequest
    ) -> pb.ConsumerGroupHeartbeatResponse:
        return self.ctx.answer(self.ctx.call("consumer_group_heartbeat", request)[0])  # type: ignore[no-any-return]

    def heartbeat(self, c: Client) -> None:
        c.on_response(self.send(c, c.request()))

    def new_client(self, slot: int, static: bool) -> None:
        self.incarnation += 1
        names, regex = SUBSCRIPTIONS[slot] if self.mixed else (["foo", "bar"], None)
        self.clients[slot] = Client(
            f"m{slot}-{self.incarnation}", f"i{slot}" if static else None, names, regex, self.assignor
        )

    def step(self, op: tuple[str, int]) -> None:
        kind, slot = op
        c = self.clients.get(slot)
        if kind == "join":
            if c is None:
                self.new_client(slot, static=slot % 2 == 0)
                self.heartbeat(self.clients[slot])
        elif kind == "tick":
            self.tick()
        elif kind == "resize":
            self.ctx.set_topics(foo=slot + 1)
        elif kind == "recreate":
            self.ctx.recreate_topic("bar", 1 + slot % 3)
        elif kind == "offloaded":
            self.ctx.advance(0)  # an offloaded assignment in flight returns now
        elif c is None or not c.alive:
            return
        elif kind == "hb":
            self.heartbeat(c)
        elif kind == "lost":
            self.send(c, c.request())  # the response never arrives: a timeout for the client
            c.full_next = True
        elif kind == "dup":
            # The response is late; the client times out and retries (a full request), and
            # the coordinator sees both.
            self.send(c, c.request())
            c.full_next = True
            retry = c.request()
            self.send(c, retry)
            c.on_response(self.send(c, retry))
        elif kind == "leave":
            self.send(
                c,
                pb.ConsumerGroupHeartbeatRequest(
                    api_version=1, group_id=G, member_id=c.member_id, member_epoch=-1
                ),
            )
            del self.clients[slot]
        elif kind == "bounce" and c.instance_id is not None:
            r = pb.ConsumerGroupHeartbeatRequest(
                api_version=1, group_id=G, member_id=c.member_id, member_epoch=-2, instance_id=c.instance_id
            )
            self.send(c, r)
            self.new_client(slot, static=True)
            self.heartbeat(self.clients[slot])
        elif kind == "crash":
            c.alive = False

    def tick(self) -> None:
        self.ctx.advance(TICK_MS)
        for c in list(self.clients.values()):
            if c.alive:
                self.heartbeat(c)

    # --- invariants ----------------------------------------------------------------------------
    def check(self) -> None:
        group = self.ctx.shard.groups.get(G)
        held: dict[tuple[bytes, int], str] = {}
        if group is not None:
            # epochs: member <= assignment <= group; partitions assigned no later than the member's epoch
            assert group.assignment_epoch <= group.group_epoch  # type: ignore[attr-defined]
            # a target only for members (a member's leave deletes its target with it)
            assert set(group.target) <= set(group.members), group.target.keys()  # type: ignore[attr-defined]
            for m in group.members.values():  # type: ignore[attr-defined]
                if m.member_epoch != -2:
                    assert 0 <= m.member_epoch <= group.assignment_epoch  # type: ignore[attr-defined]
                    for epochs in m.assigned.values():
                        assert all(e <= m.member_epoch for e in epochs.values())
            for m in group.members.values():  # type: ignore[attr-defined]
                for source in (m.assigned, m.pending_revocation):
                    for tid, parts in source.items():
                        for p in parts:
                            assert (tid, p) not in held, (
                                f"{(tid, p)} held by {held[(tid, p)]} and {m.member_id}"
                            )
                            held[(tid, p)] = m.member_id
        members = group.members if group is not None else {}  # type: ignore[attr-defined]
        for c in self.clients.values():
            if c.member_id not in members:
                continue  # removed (expired): its client learns on its next heartbeat
            for tid, parts in c.owned.items():
                for p in parts:
                    assert held.get((tid, p)) == c.member_id, f"{c.member_id} holds {(tid, p)}"
        self.ctx.assert_replay_equals_live()

    def converged(self) -> bool:
        group = self.ctx.shard.groups.get(G)
        live = [c for c in self.clients.values() if c.alive]
        if group is None:
            return not live
        if group.state_name() not in ("Stable", "Empty"):  # type: ignore[union-attr]
            return False
        for c in live:
            member = group.members.get(c.member_id)  # type: ignore[attr-defined]
            if member is None or c.epoch != group.group_epoch:  # type: ignore[attr-defined]
                return False
            target = {t: set(ps) for t, ps in group.target.get(c.member_id, {}).items()}  # type: ignore[attr-defined]
            held = c.received if c.received is not None else c.owned
            if {t: ps for t, ps in held.items() if ps} != target:
                return False
        if not all(c.member_id in group.members for c in live):  # type: ignore[attr-defined]
            return False
        # and the target covers every partition of every topic a live client subscribes to
        image = self.ctx.shard.image
        wanted = set()
        for c in live:
            for name in image.names():
                if name in (c.names or []) or (c.regex is not None and re.fullmatch(c.regex, name)):
                    t = image.by_name[name]
                    wanted |= {(t.topic_id, p) for p in range(t.num_partitions)}
        targets = group.target.values()  # type: ignore[attr-defined]
        return wanted == {(t, p) for a in targets for t, ps in a.items() for p in ps}


OPS = st.one_of(
    st.tuples(st.sampled_from(["join", "hb", "lost", "dup", "leave", "bounce", "crash"]), st.integers(0, 4)),
    st.tuples(st.just("tick"), st.just(0)),
    st.tuples(st.just("resize"), st.integers(1, 7)),
    st.tuples(st.just("recreate"), st.integers(0, 2)),
)


def _run(world: World, ops: list[tuple[str, int]], rounds: int = CONVERGENCE_ROUNDS) -> None:
    """Apply the steps checking the invariants after each; then, with the input stopped, the
    group converges within ``rounds`` ticks and stays quiet."""
    for op in ops:
        world.step(op)
        world.check()
    for _ in range(rounds):
        if world.converged():
            break
        world.tick()
        world.check()
    assert world.converged(), world.ctx.shard.groups.get(G)
    # Converged means quiet: another round writes nothing.
    before = len(world.ctx.log.entries)
    world.tick()
    assert len(world.ctx.log.entries) == before


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=5, max_size=40))
def test_random_histories_are_safe_replayable_and_converge(ops: list[tuple[str, int]]) -> None:
    _run(World(), ops)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=5, max_size=40), assignor=st.sampled_from([None, "range"]))
def test_heterogeneous_and_regex_subscriptions_with_batched_assignment(
    ops: list[tuple[str, int]], assignor: str | None
) -> None:
    """Names, regexes and narrower subscriptions mixed; the target computed at most every 3 s."""
    _run(World(GroupConfig(consumer_group_assignment_interval_ms=3_000), mixed=True, assignor=assignor), ops)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(st.one_of(OPS, st.tuples(st.just("offloaded"), st.just(0))), min_size=5, max_size=40),
    mixed=st.booleans(),
)
def test_offloaded_assignments_are_safe_replayable_and_converge(ops: list[tuple[str, int]], mixed: bool) -> None:
    """Every assignment off the loop (KIP-1263): members heartbeat, join, leave and bounce
    while a run is in flight, and a run returns only when the history says so (or at a tick)."""
    _run(World(GroupConfig(consumer_group_assignor_offload_min_size=0), mixed=mixed), ops)
