"""Moving one member from its current assignment towards its target (Kafka's CurrentAssignmentBuilder).

KIP-848's reconciliation rules, per member and per heartbeat:

* **revoke first** — partitions the member has but the target does not are kept "pending
  revocation"; the member stays at its epoch (state ``UNREVOKED_PARTITIONS``) until its
  heartbeat's owned partitions no longer contain any of them;
* only then does it move to the next epoch and get **new partitions** — and a partition only
  once its previous owner released it (until then the member is ``UNRELEASED_PARTITIONS`` at
  the target epoch, owning what it already could get);
* with nothing left to revoke or wait for, it is ``STABLE`` at the target epoch.

Every assigned partition carries the member epoch at which it was assigned (KIP-1251), kept
while the member keeps it or still has to revoke it, so an offset commit racing an epoch bump
stays valid for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from groupcoord.coordinator.core.consumer.consumer_group import (
    ConsumerGroupMember,
    MemberState,
    Partitions,
    replace_member,
)

# (topic id, partition) -> id of the member owning it (assigned or pending revocation), or None
OwnerOf = Callable[[bytes, int], str | None]


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    owner_of: OwnerOf,
    owned: Mapping[bytes, frozenset[int]] | None,
    also_self: str | None = None,
) -> ConsumerGroupMember:
    """The member after this heartbeat (the same object when nothing changes).

    ``owned`` is the heartbeat's owned partitions (None when the request did not carry them:
    the member is then assumed to still own everything it was asked to revoke).
    ``also_self`` names a member id whose ownership counts as this member's own (a static
    member replacing its previous incarnation in the same batch of records).
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owner_of, owned, also_self)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return member
        # Revoked: the member moves on to the next epoch, towards the latest target.
        return _next_assignment(
            member,
            min(member.member_epoch + 1, target_epoch),
            target_epoch,
            target,
            owner_of,
            owned,
            also_self,
        )
    return _next_assignment(member, member.member_epoch, target_epoch, target, owner_of, owned, also_self)


def _still_owns(
    owned: Mapping[bytes, frozenset[int]] | None, partitions: Mapping[bytes, Iterable[int]]
) -> bool:
    if owned is None:
        return any(partitions.values())
    for tid, parts in partitions.items():
        mine = owned.get(tid)
        if mine and not mine.isdisjoint(parts):
            return True
    return False


def _next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Partitions,
    owner_of: OwnerOf,
    owned: Mapping[bytes, frozenset[int]] | None,
    also_self: str | None,
) -> ConsumerGroupMember:
    selves = {member.member_id} if also_self is None else {member.member_id, also_self}
    kept: dict[bytes, dict[int, int]] = {}
    revoking: dict[bytes, dict[int, int]] = {}
    assignable: dict[bytes, list[int]] = {}
    unreleased = False
    for tid in set(target) | set(member.assigned):
        want = target.get(tid, frozenset())
        have = member.assigned.get(tid, {})
        keep = {p: e for p, e in have.items() if p in want}
        if keep:
            kept[tid] = keep
        revoke = {p: e for p, e in have.items() if p not in want}
        if revoke:
            revoking[tid] = revoke
        free = []
        for p in want:
            if p in have:
                continue
            owner = owner_of(tid, p)
            if owner is None or owner in selves:
                free.append(p)
            else:
                unreleased = True
        if free:
            assignable[tid] = free

    if revoking and _still_owns(owned, revoking):
        # Revoke first: stay at the current epoch with only the kept partitions.
        return _changed(member, member_epoch, MemberState.UNREVOKED_PARTITIONS, kept, revoking)
    for tid, parts in assignable.items():
        into = kept.setdefault(tid, {})
        for p in parts:
            into[p] = target_epoch
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _changed(member, target_epoch, state, kept, {})


def _changed(
    member: ConsumerGroupMember,
    epoch: int,
    state: MemberState,
    assigned: dict[bytes, dict[int, int]],
    pending: Mapping[bytes, Mapping[int, int]],
) -> ConsumerGroupMember:
    if (
        epoch == member.member_epoch
        and state is member.state
        and assigned == member.assigned
        and pending == member.pending_revocation
    ):
        return member
    previous = member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch
    return replace_member(
        member,
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned=assigned,
        pending_revocation=pending,
    )
