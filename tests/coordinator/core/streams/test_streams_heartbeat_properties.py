"""Invariants of streams groups under any sequence of what members do (hypothesis).

Members behave as Kafka Streams' ``StreamsMembershipManager`` does: each keeps the tasks its
last response gave it, reports them as owned, and acts on a new assignment at its next
heartbeat; between heartbeats members join (several per process), leave, or fall silent until
their session expires. After every step, over the shard's state:

- no task is active on two members, nor held twice by one process (active, standby or not);
- no member owns, by its own account, a task active elsewhere (what a client runs);
- once every member has settled, every task of the topology is active on exactly one member;

and at the end, the log replayed into a fresh shard is the live state.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the core tests' drivers

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from shard_test_context import ShardContext  # noqa: E402

from groupcoord.coordinator.core.config import GroupConfig  # noqa: E402
from groupcoord.coordinator.core.streams.streams_group import StreamsGroup  # noqa: E402
from groupcoord.rpc.v1 import streams_group_pb2 as pb  # noqa: E402
from tests.coordinator.core.streams.test_streams_groups_in_shard import (  # noqa: E402
    APP,
    CHANGELOG,
    REPARTITION,
    image,
    topology,
)

PARTITIONS = 3
ALL_TASKS = {(s, p) for s in ("0", "1") for p in range(PARTITIONS)}


class Member:
    def __init__(self, member_id: str, process: str) -> None:
        self.member_id, self.process = member_id, process
        self.epoch = 0
        self.active: dict[str, list[int]] = {}
        self.standby: dict[str, list[int]] = {}

    def request(self) -> pb.StreamsGroupHeartbeatRequest:
        r = pb.StreamsGroupHeartbeatRequest(
            api_version=0, group_id=APP, member_id=self.member_id, member_epoch=self.epoch, rebalance_timeout_ms=-1
        )
        if self.epoch == 0:
            r.rebalance_timeout_ms = 30_000
            r.topology.CopyFrom(topology())
            r.process_id = self.process
        for kind, tasks in (("active_tasks", self.active), ("standby_tasks", self.standby), ("warmup_tasks", {})):
            getattr(r, kind).SetInParent()
            for s, ps in sorted(tasks.items()):
                getattr(r, kind).tasks.add(subtopology_id=s, partitions=ps)
        return r

    def heard(self, response: pb.StreamsGroupHeartbeatResponse) -> bool:
        """Take the response as the client does; False when it was fenced or unknown."""
        if response.error_code:
            return False
        self.epoch = response.member_epoch
        if response.HasField("active_tasks"):
            self.active = {t.subtopology_id: list(t.partitions) for t in response.active_tasks.tasks}
            self.standby = {t.subtopology_id: list(t.partitions) for t in response.standby_tasks.tasks}
        return True


actions = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, 2)),  # a new member on process 0..2
        st.tuples(st.just("beat"), st.integers(0, 7)),  # the i-th live member heartbeats
        st.tuples(st.just("leave"), st.integers(0, 7)),
        st.tuples(st.just("silence"), st.integers(0, 7)),  # falls silent past its session
    ),
    max_size=40,
)


def _group(ctx: ShardContext) -> StreamsGroup | None:
    group = ctx.shard.groups.get(APP)
    return group if isinstance(group, StreamsGroup) else None


def _assert_no_task_twice(ctx: ShardContext, members: list[Member]) -> None:
    group = _group(ctx)
    if group is None:
        return
    actives: dict[tuple[str, int], str] = {}
    held: dict[tuple[str, str, int], str] = {}
    for m in group.members.values():
        tasks = m.tasks
        for tuple_ in (tasks.assigned, tasks.pending_revocation):
            for kind in ("active", "standby", "warmup"):
                for s, ps in getattr(tuple_, kind).items():
                    for p in ps:
                        if kind == "active":
                            assert actives.setdefault((s, p), m.member_id) == m.member_id, f"{s}_{p} active twice"
                        owner = held.setdefault((tasks.process_id, s, p), m.member_id)
                        assert owner == m.member_id or kind != "active", f"{s}_{p} twice on {tasks.process_id}"
    # what the clients believe they run
    running: dict[tuple[str, int], str] = {}
    for member in members:
        for s, ps in member.active.items():
            for p in ps:
                assert running.setdefault((s, p), member.member_id) == member.member_id, f"{s}_{p} run twice"


def _settle(ctx: ShardContext, members: list[Member]) -> None:
    """Past any initial rebalance delay, heartbeat every member in turn until nothing changes
    (at most a few rounds)."""
    ctx.advance(3_000)
    for _ in range(6):
        for member in list(members):
            token, _ = ctx.call("streams_group_heartbeat", member.request())
            if not member.heard(ctx.answer(token)):
                members.remove(member)
            _assert_no_task_twice(ctx, members)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_no_task_runs_twice_and_replay_equals_live(script: list[tuple[str, int]]) -> None:
    ctx = ShardContext(GroupConfig())
    ctx.apply(ctx.shard.on_metadata_update(image(lines=PARTITIONS, **{REPARTITION: PARTITIONS, CHANGELOG: PARTITIONS}), 0))
    members: list[Member] = []
    joined = 0
    for action, n in script:
        if action == "join":
            member = Member(f"m{joined}", f"p{n}")
            joined += 1
            members.append(member)
            token, _ = ctx.call("streams_group_heartbeat", member.request())
            assert member.heard(ctx.answer(token))
        elif not members:
            continue
        elif action == "beat":
            member = members[n % len(members)]
            token, _ = ctx.call("streams_group_heartbeat", member.request())
            if not member.heard(ctx.answer(token)):
                members.remove(member)
        elif action == "leave":
            member = members.pop(n % len(members))
            leave = pb.StreamsGroupHeartbeatRequest(
                group_id=APP, member_id=member.member_id, member_epoch=-1, rebalance_timeout_ms=-1
            )
            token, _ = ctx.call("streams_group_heartbeat", leave)
            assert ctx.answer(token).member_epoch == -1
        else:  # silent: every other member keeps heartbeating while its session runs out
            silent = members.pop(n % len(members))
            for _ in range(10):
                ctx.advance(5_000)
                for member in list(members):
                    token, _ = ctx.call("streams_group_heartbeat", member.request())
                    if not member.heard(ctx.answer(token)):
                        members.remove(member)
            group = _group(ctx)
            assert group is None or silent.member_id not in group.members, "fenced after its session"
        _assert_no_task_twice(ctx, members)
    _settle(ctx, members)
    if members:
        running = {(s, p) for m in members for s, ps in m.active.items() for p in ps}
        assert running == ALL_TASKS, "settled: every task active on exactly one member"
    ctx.assert_replay_equals_live()
