"""A streams group's members reconciling towards a new target, as KIP-1071 tells it: revoke
first, then take each new task once its previous holder let it go. Hypothesis drives whole
groups through two targets, heartbeats in any order, revocations acknowledged late or at once,
and checks at every step that no task is active on two members and no process holds one task
twice; in the end every member is stable on its target."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.streams.reconciliation import (
    MemberState,
    MemberTasksState,
    TasksTuple,
    owners_of,
    reconcile,
)
from groupcoord.coordinator.core.streams.task_assignor import (
    MemberTasks,
    StreamsMemberSpec,
    Subtopology,
    TaskGroupSpec,
    assign_tasks,
)


def tuple_of(tasks: MemberTasks) -> TasksTuple:
    return TasksTuple(
        active={s: frozenset(ps) for s, ps in tasks.active.items() if ps},
        standby={s: frozenset(ps) for s, ps in tasks.standby.items() if ps},
    )


def held(m: MemberTasksState) -> list[tuple[str, str, int]]:
    """(kind, subtopology, partition) of everything the member has, assigned or pending."""
    return [
        (kind, s, p)
        for tasks in (m.assigned, m.pending_revocation)
        for kind in ("active", "standby", "warmup")
        for s, ps in getattr(tasks, kind).items()
        for p in ps
    ]


def check_no_task_twice(members: dict[str, MemberTasksState]) -> None:
    active = Counter((s, p) for m in members.values() for kind, s, p in held(m) if kind == "active")
    assert not [t for t, n in active.items() if n > 1], "a task active on two members"
    per_process = Counter((m.process_id, s, p) for m in members.values() for _, s, p in held(m))
    assert not [t for t, n in per_process.items() if n > 1], "a process holding one task twice"


def test_a_task_moves_only_once_its_old_owner_revoked_it() -> None:
    """Task 1-0 moves from m0 to m1: m0 is asked to revoke it and stays at its epoch; m1 moves
    to the new epoch without it until m0's heartbeat no longer owns it."""
    m0 = MemberTasksState("m0", "p0", 1, assigned=TasksTuple(active={"1": frozenset({0, 1})}))
    m1 = MemberTasksState("m1", "p1", 1, assigned=TasksTuple(active={"1": frozenset({2})}))
    targets = {"m0": TasksTuple(active={"1": frozenset({1})}), "m1": TasksTuple(active={"1": frozenset({0, 2})})}
    members = {"m0": m0, "m1": m1}

    members["m0"] = reconcile(m0, 2, targets["m0"], owners_of(members), owned=m0.assigned)
    assert members["m0"].state is MemberState.UNREVOKED_TASKS and members["m0"].member_epoch == 1
    assert members["m0"].pending_revocation == TasksTuple(active={"1": frozenset({0})})

    members["m1"] = reconcile(m1, 2, targets["m1"], owners_of(members), owned=m1.assigned)
    assert members["m1"].state is MemberState.UNRELEASED_TASKS and members["m1"].member_epoch == 2
    assert members["m1"].assigned == TasksTuple(active={"1": frozenset({2})})

    revoked = TasksTuple(active={"1": frozenset({1})})
    members["m0"] = reconcile(members["m0"], 2, targets["m0"], owners_of(members), owned=revoked)
    assert members["m0"].state is MemberState.STABLE and members["m0"].member_epoch == 2
    members["m1"] = reconcile(members["m1"], 2, targets["m1"], owners_of(members), owned=members["m1"].assigned)
    assert members["m1"].state is MemberState.STABLE and members["m1"].assigned == targets["m1"]


def test_a_heartbeat_that_does_not_say_what_it_owns_revokes_nothing() -> None:
    m0 = MemberTasksState("m0", "p0", 1, assigned=TasksTuple(standby={"1": frozenset({0})}))
    m0 = reconcile(m0, 2, TasksTuple(), owners_of({"m0": m0}), owned=TasksTuple(standby={"1": frozenset({0})}))
    assert m0.state is MemberState.UNREVOKED_TASKS
    assert reconcile(m0, 2, TasksTuple(), owners_of({"m0": m0}), owned=None) is m0


def test_a_standby_waits_while_its_active_is_still_on_the_same_process() -> None:
    """m0 and m1 run in one process: m1's new standby of task 1-0 waits while m0, on that
    process, still has 1-0 active."""
    m0 = MemberTasksState("m0", "p", 1, assigned=TasksTuple(active={"1": frozenset({0})}))
    m1 = MemberTasksState("m1", "p", 1)
    m1 = reconcile(m1, 2, TasksTuple(standby={"1": frozenset({0})}), owners_of({"m0": m0, "m1": m1}), owned=TasksTuple())
    assert m1.state is MemberState.UNRELEASED_TASKS and m1.assigned == TasksTuple()


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, str], TaskGroupSpec, TaskGroupSpec, list[tuple[str, bool]]]:
    processes = draw(st.integers(1, 4))
    process_of = {f"m{i}": f"p{draw(st.integers(0, processes - 1))}" for i in range(draw(st.integers(1, 6)))}

    def spec() -> TaskGroupSpec:
        subs = {f"s{i}": Subtopology(draw(st.integers(0, 6)), draw(st.booleans())) for i in range(draw(st.integers(1, 3)))}
        return TaskGroupSpec({m: StreamsMemberSpec(p) for m, p in process_of.items()}, subs, draw(st.integers(0, 2)))

    first, second = spec(), spec()
    beats = draw(st.lists(st.tuples(st.sampled_from(sorted(process_of)), st.booleans()), max_size=60))
    return process_of, first, second, beats


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_no_task_is_held_twice_while_a_group_moves_between_two_targets(scenario) -> None:
    process_of, first, second, beats = scenario
    members = {m: MemberTasksState(m, p, 0) for m, p in process_of.items()}
    for epoch, spec in ((1, first), (2, second)):
        target = {m: tuple_of(t) for m, t in assign_tasks(spec).items()}

        def beat(m: str, acknowledge: bool, epoch: int = epoch, target: dict[str, TasksTuple] = target) -> None:
            member = members[m]
            owned = member.assigned if acknowledge else TasksTuple(
                **{
                    kind: {
                        s: getattr(member.assigned, kind).get(s, frozenset())
                        | getattr(member.pending_revocation, kind).get(s, frozenset())
                        for s in getattr(member.assigned, kind).keys() | getattr(member.pending_revocation, kind).keys()
                    }
                    for kind in ("active", "standby", "warmup")
                }
            )
            members[m] = reconcile(member, epoch, target[m], owners_of(members), owned)
            check_no_task_twice(members)

        for m, acknowledge in beats:  # any order, revocations acknowledged or not
            beat(m, acknowledge)
        for _ in range(4):  # then every member heartbeats, acknowledging, until it settles
            for m in sorted(members):
                beat(m, True)
        for m, member in members.items():
            assert member.state is MemberState.STABLE and member.member_epoch == epoch, member
            assert member.assigned == target[m]
