"""The steady-heartbeat fast path answers exactly as the full path would.

A ConsumerGroupHeartbeat that changes nothing (a stable member at its group's target epoch,
saying nothing new) skips the full path's copies and comparisons
(``consumer_heartbeat._steady_heartbeat``). Whatever it accepts, the full path must answer the
same: the same response bytes, the same timers, and no record. The groups come from the
random histories of the consumer-group properties (joins, lost responses, bounces, crashes,
resizes, regexes, batched and offloaded assignments); at every heartbeat of every history,
the client's own request and variants of it (another epoch, instance id, rack, assignor,
rebalance timeout, client id, subscription, undescribable topics) are asked of both paths.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_consumer_group_properties import OPS, World, _run

from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.consumer import consumer_heartbeat
from groupcoord.coordinator.core.contract import ScheduleTimer
from groupcoord.rpc.v1 import consumer_group_pb2 as pb


def _variants(r: pb.ConsumerGroupHeartbeatRequest) -> list[pb.ConsumerGroupHeartbeatRequest]:
    """The request, and the request with one field changed the way clients change it."""
    out = [r]

    def variant(**fields: Any) -> None:
        v = pb.ConsumerGroupHeartbeatRequest()
        v.CopyFrom(r)
        for name, value in fields.items():
            if name == "names":
                v.subscribed_topic_names.SetInParent()
                v.subscribed_topic_names.names.extend(value)
            elif name == "undescribable":
                v.undescribable_topics.extend(value)
            else:
                setattr(v, name, value)
        out.append(v)

    for delta in (-1, 1, -r.member_epoch):
        if r.member_epoch + delta >= 0:
            variant(member_epoch=r.member_epoch + delta)
    variant(instance_id="someone-else")
    variant(rack_id="rack-b")
    variant(server_assignor="range")
    variant(server_assignor="uniform")
    variant(rebalance_timeout_ms=60_000)
    variant(rebalance_timeout_ms=1_234)
    variant(client_id="other-client")
    variant(client_host="/10.0.0.9")
    variant(names=["foo", "bar"])
    variant(subscribed_topic_regex="fo.*")
    variant(undescribable=["foo"])
    variant(member_id="not-a-member")
    return out


def _timers(timers: list[Any]) -> list[Any]:
    """Timer intents as comparable values (an operation is a new partial each time)."""
    return [
        (t.key, t.delay_ms, t.operation.func, t.operation.args)
        if isinstance(t, ScheduleTimer)
        else (type(t).__name__, t.key)
        for t in timers
    ]


class ComparingWorld(World):
    """A world whose every heartbeat is first asked of both paths, with its variants."""

    def __init__(self, config: GroupConfig | None = None, mixed: bool = False) -> None:
        super().__init__(config, mixed)
        self.fast = 0

    def send(self, client: Any, request: pb.ConsumerGroupHeartbeatRequest) -> pb.ConsumerGroupHeartbeatResponse:
        ctx, now = self.ctx.shard.consumer, self.ctx.clock.now_ms
        if request.member_epoch > 0:
            for variant in _variants(request):
                steady = consumer_heartbeat._steady_heartbeat(ctx, variant, now)
                if steady is None:
                    continue
                self.fast += 1
                full = consumer_heartbeat._heartbeat(ctx, variant, now)
                assert not full.records, (variant, full.records)
                assert steady.response.SerializeToString() == full.response.SerializeToString()
                assert _timers(steady.timers) == _timers(full.timers)
                assert not steady.records and not steady.completions
        return super().send(client, request)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=5, max_size=40), mixed=st.booleans(), batched=st.booleans())
def test_fast_path_answers_as_the_full_path(ops: list[tuple[str, int]], mixed: bool, batched: bool) -> None:
    config = GroupConfig(consumer_group_assignment_interval_ms=3_000) if batched else None
    world = ComparingWorld(config, mixed=mixed)
    _run(world, ops)
    if any(c.alive for c in world.clients.values()):
        assert world.fast > 0  # a history ends converged: its last round is steady


def test_a_steady_member_takes_the_fast_path_and_a_changed_one_does_not() -> None:
    world = World()
    _run(world, [("join", 0), ("join", 1)])
    ctx, now = world.ctx.shard.consumer, world.ctx.clock.now_ms
    member = ctx.groups["group"].members[world.clients[0].member_id]  # static, by names
    accepted = [
        v for v in _variants(world.clients[0].request()) if consumer_heartbeat._steady_heartbeat(ctx, v, now)
    ]
    # the request itself, its own rebalance timeout said again, and topics filtered out of a
    # regex this member does not use: nothing changes; every other variant changes something
    assert [(v.rebalance_timeout_ms, list(v.undescribable_topics)) for v in accepted] == [
        (-1, []),
        (member.rebalance_timeout_ms, []),
        (-1, ["foo"]),
    ]
