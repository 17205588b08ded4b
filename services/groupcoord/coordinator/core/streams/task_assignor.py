"""The ``sticky`` task assignor of streams groups (Kafka's ``StickyTaskAssignor``, KIP-1071).

A streams group's work is tasks, not partitions: a subtopology of the application's topology
has one task per input partition (the largest partition count of its source topics), and a
task of a stateful subtopology may have standbys, copies of its state kept warm on other
Kafka Streams processes so that a failover does not restore from the changelog.

What it guarantees, as Kafka's does (and ``tests/coordinator/core/streams`` checks with
hypothesis):

* every task is active on exactly one member, and no member holds more active tasks than
  ``ceil(active tasks / members)``;
* a standby never sits on the process of its task's active, nor two standbys of one task on
  one process; a task gets ``num_standby_replicas`` standbys when there are that many other
  processes, else one per other process;
* sticky: an active stays with its member while that member is within its quota, then goes
  preferably to a member that held it as a standby or warm-up (its state is there); standbys
  stay where they were while their member is within its share of all tasks; so assigning a
  group its own assignment again moves nothing;
* deterministic: members, processes and tasks are taken in sorted order, so a recomputation
  after a failover gives the same answer.

Load is counted per process (its tasks over its members): processes stand for machines, and a
process with more members (stream threads that joined as members) takes more. Stateful
subtopologies' tasks are placed before stateless ones, so that the stateful, costly tasks are
spread evenly first, as Kafka places them.

Not yet as Kafka 4.4 does: rack awareness by client tags (``rack.aware.assignment.tags``),
warm-up tasks for a planned move (``acceptable.recovery.lag``: Kafka's sticky assignor assigns
none either), and ranking standby candidates by their reported task offsets.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

# subtopology id -> partitions (task ids within the subtopology)
Tasks = Mapping[str, Collection[int]]
TaskId = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Subtopology:
    """One subtopology of the group's topology, as the assignor needs it."""

    partitions: int  # its tasks: 0 .. partitions - 1
    stateful: bool  # it has state stores (its tasks get standbys)


@dataclass(frozen=True, slots=True)
class StreamsMemberSpec:
    """A member: the Kafka Streams process it runs in, and its current target (stickiness)."""

    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskGroupSpec:
    members: Mapping[str, StreamsMemberSpec]
    subtopologies: Mapping[str, Subtopology]
    num_standby_replicas: int = 0


@dataclass(slots=True)
class MemberTasks:
    """A member's new target: subtopology id -> sorted partitions, for each kind of task."""

    active: dict[str, list[int]] = field(default_factory=dict)
    standby: dict[str, list[int]] = field(default_factory=dict)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _task_ids(tasks: Tasks) -> Iterable[TaskId]:
    for subtopology, partitions in tasks.items():
        for p in partitions:
            yield subtopology, p


class _Placement:
    """The assignment being built: who holds what, and each member's and process's counts."""

    def __init__(self, group: TaskGroupSpec) -> None:
        self.members = sorted(group.members)
        self.process_of = {m: group.members[m].process_id for m in self.members}
        self.process_members: dict[str, list[str]] = {}
        for m in self.members:
            self.process_members.setdefault(self.process_of[m], []).append(m)
        self.active_owner: dict[TaskId, str] = {}
        self.standby_processes: dict[TaskId, set[str]] = {}
        self.active_count = dict.fromkeys(self.members, 0)
        self.total_count = dict.fromkeys(self.members, 0)
        self.process_active = dict.fromkeys(self.process_members, 0)
        self.process_total = dict.fromkeys(self.process_members, 0)
        self.result = {m: MemberTasks() for m in self.members}

    def active_load(self, process: str) -> float:
        return self.process_active[process] / len(self.process_members[process])

    def total_load(self, process: str) -> float:
        return self.process_total[process] / len(self.process_members[process])

    def add_active(self, task: TaskId, member: str) -> None:
        process = self.process_of[member]
        self.active_owner[task] = member
        self.active_count[member] += 1
        self.total_count[member] += 1
        self.process_active[process] += 1
        self.process_total[process] += 1
        self.result[member].active.setdefault(task[0], []).append(task[1])

    def add_standby(self, task: TaskId, member: str) -> None:
        process = self.process_of[member]
        self.standby_processes.setdefault(task, set()).add(process)
        self.total_count[member] += 1
        self.process_total[process] += 1
        self.result[member].standby.setdefault(task[0], []).append(task[1])

    def may_hold_standby(self, task: TaskId, process: str) -> bool:
        owner = self.active_owner.get(task)
        return (owner is None or self.process_of[owner] != process) and process not in self.standby_processes.get(
            task, ()
        )


def assign_tasks(group: TaskGroupSpec) -> dict[str, MemberTasks]:
    """The group's new target assignment: every member present, possibly with nothing."""
    if not group.members:
        return {}
    placement = _Placement(group)
    ordered = sorted(group.subtopologies.items(), key=lambda item: (not item[1].stateful, item[0]))
    tasks = [(s, p) for s, sub in ordered for p in range(sub.partitions)]
    stateful = [(s, p) for s, p in tasks if group.subtopologies[s].stateful]
    _assign_active(group, placement, tasks)
    if group.num_standby_replicas > 0:
        total = len(tasks) + len(stateful) * group.num_standby_replicas
        _assign_standby(group, placement, stateful, _ceil_div(total, len(placement.members)))
    for tasks_of in placement.result.values():
        for lists in (tasks_of.active, tasks_of.standby):
            for partitions in lists.values():
                partitions.sort()
    return placement.result


def _previous_holders(group: TaskGroupSpec, kinds: tuple[str, ...]) -> dict[TaskId, list[str]]:
    """Task -> the members (in sorted order) whose current target holds it as one of ``kinds``."""
    holders: dict[TaskId, list[str]] = {}
    for member in sorted(group.members):
        spec = group.members[member]
        for kind in kinds:
            for task in _task_ids(getattr(spec, kind)):
                holders.setdefault(task, []).append(member)
    return holders


def _assign_active(group: TaskGroupSpec, placement: _Placement, tasks: list[TaskId]) -> None:
    quota = _ceil_div(len(tasks), len(placement.members))
    count = placement.active_count
    previous = _previous_holders(group, ("active",))
    rest: list[TaskId] = []
    for task in tasks:  # 1. with the member that has it, within that member's quota
        owner = next((m for m in previous.get(task, ()) if count[m] < quota), None)
        if owner is not None:
            placement.add_active(task, owner)
        else:
            rest.append(task)
    warm = _previous_holders(group, ("standby", "warmup"))
    unplaced: list[TaskId] = []
    for task in rest:  # 2. with a member that has its state: the least loaded of them
        holders = [m for m in warm.get(task, ()) if count[m] < quota]
        if holders:
            placement.add_active(task, min(holders, key=lambda m: (placement.active_load(placement.process_of[m]), m)))
        else:
            unplaced.append(task)
    # 3. the least loaded process, and in it the member with the fewest active tasks
    heap = [(placement.active_load(p), p) for p in placement.process_members]
    heapq.heapify(heap)
    for task in unplaced:
        while True:
            load, process = heapq.heappop(heap)
            if load != placement.active_load(process):
                continue  # stale entry: the process was given tasks since
            below = [m for m in placement.process_members[process] if count[m] < quota]
            if below:
                break
        placement.add_active(task, min(below, key=lambda m: (count[m], m)))
        heapq.heappush(heap, (placement.active_load(process), process))


def _assign_standby(group: TaskGroupSpec, placement: _Placement, tasks: list[TaskId], quota: int) -> None:
    replicas = min(group.num_standby_replicas, len(placement.process_members) - 1)
    total = placement.total_count
    previous = _previous_holders(group, ("standby", "warmup"))
    for task in tasks:  # 1. where they were, while their member is within its share
        kept = 0
        for member in previous.get(task, ()):
            if kept < replicas and total[member] < quota and placement.may_hold_standby(task, placement.process_of[member]):
                placement.add_standby(task, member)
                kept += 1
    # 2. the rest on the least loaded processes that may hold them: a heap of (load, process),
    # where a process that may not hold this task (it has the active or a standby already:
    # at most replicas + 1 of them) is set aside and put back, so a placement costs a few pops
    # rather than a look at every process
    heap = [(placement.total_load(p), p) for p in placement.process_members]
    heapq.heapify(heap)
    for task in tasks:
        for _ in range(replicas - len(placement.standby_processes.get(task, ()))):
            set_aside, process = [], None
            while heap:
                load, candidate = heapq.heappop(heap)
                if load != placement.total_load(candidate):
                    continue  # stale: the process was given tasks since (its fresh entry is in)
                if placement.may_hold_standby(task, candidate):
                    process = candidate
                    break
                set_aside.append((load, candidate))
            for entry in set_aside:
                heapq.heappush(heap, entry)
            if process is None:
                break
            member = min(placement.process_members[process], key=lambda m: (total[m], m))
            placement.add_standby(task, member)
            heapq.heappush(heap, (placement.total_load(process), process))
