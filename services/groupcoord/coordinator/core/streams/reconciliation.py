"""Moving one streams-group member from its current tasks towards its target (Kafka's streams
``CurrentAssignmentBuilder``, KIP-1071): KIP-848's reconciliation, with tasks for partitions.

Per member and per heartbeat:

* **revoke first** — tasks (active, standby or warm-up) the member has but its target does not
  are pending revocation; it stays at its epoch (``UNREVOKED_TASKS``) until its heartbeat's
  owned tasks contain none of them (a heartbeat that does not say what it owns has not
  revoked anything);
* then it moves to the target epoch and gets its **new tasks**, each once it is released:
  an active task while no member owns it as active, nor any member of this member's process
  holds it as a standby or warm-up; a standby or warm-up task while its active is not on this
  process and no member of this process holds it already (a process never runs one task
  twice). Until then it is ``UNRELEASED_TASKS`` at the target epoch;
* with nothing left to revoke or wait for, it is ``STABLE``.

So no task is ever active on two members, and no process ever holds one task twice — the
invariant ``tests/coordinator/core/streams/test_reconciliation.py`` drives whole groups
through target changes to check. Not yet as Kafka 4.4 does: the assignment epoch of each
active task (what an offset commit racing an epoch bump is checked against).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

Tasks = Mapping[str, frozenset[int]]  # subtopology id -> partitions


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_TASKS = "unrevoked_tasks"
    UNRELEASED_TASKS = "unreleased_tasks"


_KINDS = ("active", "standby", "warmup")


@dataclass(frozen=True, slots=True)
class TasksTuple:
    """A member's active, standby and warm-up tasks (only non-empty subtopologies kept)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def contains_any(self, other: TasksTuple) -> bool:
        for kind in _KINDS:
            mine: Tasks = getattr(self, kind)
            for subtopology, partitions in getattr(other, kind).items():
                if not mine.get(subtopology, frozenset()).isdisjoint(partitions):
                    return True
        return False


@dataclass(frozen=True, slots=True)
class MemberTasksState:
    """What reconciliation reads and changes of a member."""

    member_id: str
    process_id: str
    member_epoch: int
    state: MemberState = MemberState.STABLE
    assigned: TasksTuple = field(default_factory=TasksTuple)
    pending_revocation: TasksTuple = field(default_factory=TasksTuple)


@dataclass(frozen=True, slots=True)
class CurrentOwners:
    """Where each task is now, over every member's assigned and pending-revocation tasks."""

    active_process: Callable[[str, int], str | None]  # the process owning it as active
    standby_processes: Callable[[str, int], frozenset[str]]
    warmup_processes: Callable[[str, int], frozenset[str]]


def reconcile(
    member: MemberTasksState,
    target_epoch: int,
    target: TasksTuple,
    owners: CurrentOwners,
    owned: TasksTuple | None,
) -> MemberTasksState:
    """The member after this heartbeat (the same object when nothing changes); ``owned`` is
    the heartbeat's owned tasks, None when it did not carry them."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owners, owned)
    if member.state is MemberState.UNREVOKED_TASKS:
        if owned is None or owned.contains_any(member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owners, owned)
    return _next(member, member.member_epoch, target_epoch, target, owners, owned)


def _next(
    member: MemberTasksState,
    member_epoch: int,
    target_epoch: int,
    target: TasksTuple,
    owners: CurrentOwners,
    owned: TasksTuple | None,
) -> MemberTasksState:
    me = member.process_id

    def here(subtopology: str, partition: int) -> bool:  # a standby or warm-up on this process
        return me in owners.standby_processes(subtopology, partition) or me in owners.warmup_processes(
            subtopology, partition
        )

    unreleased_by_kind: dict[str, Callable[[str, int], bool]] = {
        "active": lambda s, p: owners.active_process(s, p) is not None or here(s, p),
        "standby": lambda s, p: owners.active_process(s, p) == me or here(s, p),
        "warmup": lambda s, p: owners.active_process(s, p) == me or here(s, p),
    }
    kept: dict[str, dict[str, frozenset[int]]] = {}
    revoking: dict[str, dict[str, frozenset[int]]] = {}
    adding: dict[str, dict[str, frozenset[int]]] = {}
    unreleased = False
    for kind in _KINDS:
        have: Tasks = getattr(member.assigned, kind)
        want: Tasks = getattr(target, kind)
        kept[kind], revoking[kind], adding[kind] = {}, {}, {}
        for subtopology in sorted(set(have) | set(want)):
            current = have.get(subtopology, frozenset())
            wanted = want.get(subtopology, frozenset())
            if keep := current & wanted:
                kept[kind][subtopology] = keep
            if revoke := current - wanted:
                revoking[kind][subtopology] = revoke
            free = set()
            for p in wanted - current:
                if unreleased_by_kind[kind](subtopology, p):
                    unreleased = True
                else:
                    free.add(p)
            if free:
                adding[kind][subtopology] = frozenset(free)
    pending = TasksTuple(**revoking)
    if not pending.is_empty() and (owned is None or owned.contains_any(pending)):
        return _changed(member, member_epoch, MemberState.UNREVOKED_TASKS, TasksTuple(**kept), pending)
    merged = {
        kind: {s: kept[kind].get(s, frozenset()) | adding[kind].get(s, frozenset()) for s in kept[kind].keys() | adding[kind].keys()}
        for kind in _KINDS
    }
    state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
    return _changed(member, target_epoch, state, TasksTuple(**merged), TasksTuple())


def _changed(
    member: MemberTasksState, epoch: int, state: MemberState, assigned: TasksTuple, pending: TasksTuple
) -> MemberTasksState:
    if (
        epoch == member.member_epoch
        and state is member.state
        and assigned == member.assigned
        and pending == member.pending_revocation
    ):
        return member
    return replace(member, member_epoch=epoch, state=state, assigned=assigned, pending_revocation=pending)


def owners_of(members: Mapping[str, MemberTasksState]) -> CurrentOwners:
    """:class:`CurrentOwners` over ``members``' assigned and pending-revocation tasks."""
    active: dict[tuple[str, int], str] = {}
    standby: dict[tuple[str, int], set[str]] = {}
    warmup: dict[tuple[str, int], set[str]] = {}
    for m in members.values():
        for tasks in (m.assigned, m.pending_revocation):
            for s, ps in tasks.active.items():
                for p in ps:
                    active[(s, p)] = m.process_id
            for into, held in ((standby, tasks.standby), (warmup, tasks.warmup)):
                for s, ps in held.items():
                    for p in ps:
                        into.setdefault((s, p), set()).add(m.process_id)
    return CurrentOwners(
        lambda s, p: active.get((s, p)),
        lambda s, p: frozenset(standby.get((s, p), ())),
        lambda s, p: frozenset(warmup.get((s, p), ())),
    )
