"""The sticky task assignor of streams groups, as KIP-1071's cases tell it: a word count of two
subtopologies (a stateless one that repartitions, a stateful one that counts), processes that
come and go, and the invariants hypothesis draws groups for: every task active once, no standby
beside its active or beside another of its standbys, quotas kept, nothing moved on a recompute."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.streams.task_assignor import (
    MemberTasks,
    StreamsMemberSpec,
    Subtopology,
    TaskGroupSpec,
    assign_tasks,
)


def word_count() -> dict[str, Subtopology]:
    """Subtopology 0 splits lines into words (stateless, 6 input partitions) and repartitions
    by word; subtopology 1 counts them in a store (stateful, 6 repartition partitions)."""
    return {"0": Subtopology(6, stateful=False), "1": Subtopology(6, stateful=True)}


def as_current(assignment: dict[str, MemberTasks], process_of: dict[str, str]) -> dict[str, StreamsMemberSpec]:
    """The members again, each with the assignment as its current target."""
    return {
        m: StreamsMemberSpec(process_of[m], active=tasks.active, standby=tasks.standby)
        for m, tasks in assignment.items()
    }


def tasks_of(assignment: dict[str, MemberTasks], kind: str) -> Counter[tuple[str, int]]:
    return Counter((s, p) for t in assignment.values() for s, ps in getattr(t, kind).items() for p in ps)


def check_invariants(group: TaskGroupSpec, assignment: dict[str, MemberTasks]) -> None:
    members = group.members
    assert set(assignment) == set(members)
    every = {(s, p) for s, sub in group.subtopologies.items() for p in range(sub.partitions)}
    active = tasks_of(assignment, "active")
    assert set(active) == every and set(active.values()) <= {1}, "every task active exactly once"
    quota = -(-len(every) // len(members))
    for m, tasks in assignment.items():
        assert sum(len(ps) for ps in tasks.active.values()) <= quota, f"{m} beyond its active quota"
    owner_process = {
        (s, p): members[m].process_id for m, t in assignment.items() for s, ps in t.active.items() for p in ps
    }
    standby_processes: dict[tuple[str, int], list[str]] = {}
    for m, t in assignment.items():
        for s, ps in t.standby.items():
            assert group.subtopologies[s].stateful, "a standby of a stateless task"
            for p in ps:
                standby_processes.setdefault((s, p), []).append(members[m].process_id)
    processes = {spec.process_id for spec in members.values()}
    wanted = min(group.num_standby_replicas, len(processes) - 1)
    for task in every:
        on = standby_processes.get(task, [])
        assert len(on) == len(set(on)), f"two standbys of {task} on one process"
        assert owner_process[task] not in on, f"a standby of {task} beside its active"
        if group.subtopologies[task[0]].stateful:
            assert len(on) == wanted, f"{task}: {len(on)} standbys of {wanted}"


def test_three_instances_of_a_word_count_share_its_tasks_and_keep_standbys_elsewhere() -> None:
    members = {f"m{i}": StreamsMemberSpec(f"process-{i}") for i in range(3)}
    group = TaskGroupSpec(members, word_count(), num_standby_replicas=1)
    assignment = assign_tasks(group)
    check_invariants(group, assignment)
    assert sorted(sum(len(ps) for ps in t.active.values()) for t in assignment.values()) == [4, 4, 4]
    # the stateful tasks are spread first: two counting tasks on each instance
    assert sorted(len(t.active.get("1", [])) for t in assignment.values()) == [2, 2, 2]
    assert sum(len(ps) for t in assignment.values() for ps in t.standby.values()) == 6


def test_an_instance_killed_hands_its_tasks_to_the_ones_that_kept_their_state() -> None:
    """One of three instances is killed: its counting tasks go to the instances holding their
    standbys, and nothing the survivors were running moves."""
    process_of = {f"m{i}": f"process-{i}" for i in range(3)}
    group = TaskGroupSpec({m: StreamsMemberSpec(p) for m, p in process_of.items()}, word_count(), 1)
    before = assign_tasks(group)
    survivors = as_current({m: t for m, t in before.items() if m != "m2"}, process_of)
    after = assign_tasks(TaskGroupSpec(survivors, word_count(), 1))
    check_invariants(TaskGroupSpec(survivors, word_count(), 1), after)
    for m in survivors:
        for s, ps in before[m].active.items():
            assert set(ps) <= set(after[m].active.get(s, [])), f"{m} lost a task it was running"
    for p in before["m2"].active.get("1", []):
        [holder] = [m for m in survivors if p in before[m].standby.get("1", [])]
        assert p in after[holder].active.get("1", []), f"counting task {p} did not go to its standby"


def test_a_single_instance_gets_every_task_and_no_standby() -> None:
    group = TaskGroupSpec({"m": StreamsMemberSpec("only")}, word_count(), num_standby_replicas=2)
    assignment = assign_tasks(group)
    check_invariants(group, assignment)
    assert assignment["m"].standby == {}
    assert assignment["m"].active == {"0": list(range(6)), "1": list(range(6))}


def test_no_members_no_assignment() -> None:
    assert assign_tasks(TaskGroupSpec({}, word_count(), 1)) == {}


@st.composite
def groups(draw: st.DrawFn) -> TaskGroupSpec:
    n_processes = draw(st.integers(1, 5))
    members = {
        f"m{i}": StreamsMemberSpec(f"p{draw(st.integers(0, n_processes - 1))}")
        for i in range(draw(st.integers(1, 8)))
    }
    subtopologies = {
        f"s{i}": Subtopology(draw(st.integers(0, 9)), draw(st.booleans())) for i in range(draw(st.integers(1, 4)))
    }
    return TaskGroupSpec(members, subtopologies, draw(st.integers(0, 3)))


@settings(max_examples=300, deadline=None)
@given(groups())
def test_every_drawn_group_keeps_the_invariants_and_a_recompute_moves_nothing(group: TaskGroupSpec) -> None:
    assignment = assign_tasks(group)
    check_invariants(group, assignment)
    assert assign_tasks(group) == assignment, "deterministic"
    process_of = {m: spec.process_id for m, spec in group.members.items()}
    again = TaskGroupSpec(as_current(assignment, process_of), group.subtopologies, group.num_standby_replicas)
    assert assign_tasks(again) == assignment, "its own assignment again moves nothing"


@settings(max_examples=200, deadline=None)
@given(groups(), st.data())
def test_members_that_stay_keep_their_active_tasks_when_others_leave(group: TaskGroupSpec, data: st.DataObject) -> None:
    """Leaving raises every member's quota or keeps it, so whoever stays runs on what it ran."""
    before = assign_tasks(group)
    process_of = {m: spec.process_id for m, spec in group.members.items()}
    staying = data.draw(st.sets(st.sampled_from(sorted(group.members)), min_size=1))
    current = as_current({m: before[m] for m in staying}, process_of)
    after_group = TaskGroupSpec(current, group.subtopologies, group.num_standby_replicas)
    after = assign_tasks(after_group)
    check_invariants(after_group, after)
    for m in staying:
        for s, ps in before[m].active.items():
            assert set(ps) <= set(after[m].active.get(s, [])), f"{m} lost an active task"


def test_standbys_stay_where_their_state_is_kept() -> None:
    """Three counting tasks, one active on each instance, standbys rotated: each standby stays
    on the instance that keeps its state, though a fresh assignment would put two on one."""
    counting = {"1": Subtopology(3, stateful=True)}
    members = {
        "m0": StreamsMemberSpec("p0", active={"1": [0]}, standby={"1": [2]}),
        "m1": StreamsMemberSpec("p1", active={"1": [1]}, standby={"1": [0]}),
        "m2": StreamsMemberSpec("p2", active={"1": [2]}, standby={"1": [1]}),
    }
    group = TaskGroupSpec(members, counting, num_standby_replicas=1)
    assignment = assign_tasks(group)
    check_invariants(group, assignment)
    assert {m: (t.active, t.standby) for m, t in assignment.items()} == {
        "m0": ({"1": [0]}, {"1": [2]}),
        "m1": ({"1": [1]}, {"1": [0]}),
        "m2": ({"1": [2]}, {"1": [1]}),
    }
    fresh = assign_tasks(TaskGroupSpec({m: StreamsMemberSpec(s.process_id) for m, s in members.items()}, counting, 1))
    assert {m: t.standby for m, t in fresh.items()} != {m: t.standby for m, t in assignment.items()}


@settings(max_examples=200, deadline=None)
@given(groups(), st.integers(1, 3), st.booleans())
def test_members_joining_get_their_share_and_the_others_keep_the_rest(
    group: TaskGroupSpec, joining: int, new_processes: bool
) -> None:
    """Joining lowers the quota: the members there keep what fits their new quota (the rest
    goes to the newcomers), and nobody is left beyond it."""
    before = assign_tasks(group)
    process_of = {m: spec.process_id for m, spec in group.members.items()}
    members = as_current(before, process_of)
    for i in range(joining):
        process = f"new-{i}" if new_processes else sorted(process_of.values())[0]
        members[f"z{i}"] = StreamsMemberSpec(process)
    after_group = TaskGroupSpec(members, group.subtopologies, group.num_standby_replicas)
    after = assign_tasks(after_group)
    check_invariants(after_group, after)
    quota = -(-sum(s.partitions for s in group.subtopologies.values()) // len(members))
    for m in group.members:
        kept = sum(len(set(ps) & set(after[m].active.get(s, []))) for s, ps in before[m].active.items())
        had = sum(len(ps) for ps in before[m].active.values())
        assert kept == min(had, quota), f"{m} kept {kept} of {had} (quota {quota})"
