"""Classic group protocol handlers: JoinGroup v0-9, SyncGroup v0-5, Heartbeat v0-4, LeaveGroup v0-5.

The classic half of Apache Kafka's ``GroupMetadataManager``, sans-IO:

* A handler copies the group (:meth:`ClassicGroup.copy`) into a :class:`_Change`, applies Kafka's
  logic to that scratch copy through the same mutators replay uses, and returns the records
  describing the change. Live state moves only when the runtime replays them.
* JoinGroup and SyncGroup answers are delayed (members wait for each other). A handler that
  cannot answer yet returns ``response=PENDING`` and parks the request's ``token``; whichever
  later request or timer settles the rebalance returns the answers as ``completions``
  ``(token, response)`` (see :class:`~groupcoord.coordinator.core.contract.CoordinatorResult`).
  Internally answers are keyed by ``("join"|"sync", group_id, member_id)``; :class:`Waiters`
  maps keys to the parked tokens. Parked tokens are connections, not state: they are not
  replayed and die with the partition's leadership.
* Timers: a session timer per member, the join-phase timer (rebalance timeout, or the initial
  rebalance delay for a group that starts empty) and one per pending member id. Handlers and
  timer operations never arm or cancel one: they return the intents in
  ``CoordinatorResult.timers`` (collected in :class:`_Change` in the order Kafka's code would
  have scheduled them). A timer runs at its deadline, which it knows (``now_ms`` of scheduling +
  delay), so no clock is read.

Pending sync: Kafka removes members that have not sent SyncGroup a rebalance timeout after the
join phase. Follower syncs write no records here, so only the case that can wedge a group is
handled: a leader that never delivers assignments (while its followers keep heartbeating) is
removed when the sync timer fires in CompletingRebalance, and the group rebalances.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from groupcoord.common.errors import CoordinatorError, ErrorCode
from groupcoord.coordinator.core.classic.group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    with_assignment,
)
from groupcoord.coordinator.core.classic.timers import heartbeat_key, join_key, pending_member_key, sync_key
from groupcoord.coordinator.core.config import GroupConfig
from groupcoord.coordinator.core.contract import (
    PENDING,
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    ScheduleTimer,
    TimerIntent,
    deadline_timer,
)
from groupcoord.coordinator.core.group import Group
from groupcoord.records.v1 import classic_group_pb2 as rpb
from groupcoord.rpc.v1 import classic_group_pb2 as pb

State = ClassicGroupState
WaitKey = tuple[str, str, str]  # ("join" | "sync", group_id, member_id)

# JoinGroup v4+ makes a new dynamic member fetch its id first (KIP-394).
JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION = 4
# JoinGroup v9+ lets a rejoining static leader skip computing an assignment (KIP-814).
_JOIN_SKIP_ASSIGNMENT_VERSION = 9


class Waiters:
    """Parked JoinGroup/SyncGroup requests: wait key → the runtime's tokens.

    Every request parked under a key is answered by the next answer for that key (a member that
    resent JoinGroup while waiting gets the same answer on both connections).
    """

    def __init__(self) -> None:
        self._parked: dict[WaitKey, list[Any]] = {}

    def park(self, key: WaitKey, token: Any) -> None:
        if token is not None:
            self._parked.setdefault(key, []).append(token)

    def release(self, answers: list[tuple[WaitKey, Any]]) -> list[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        for key, response in answers:
            for token in self._parked.pop(key, ()):
                out.append((token, response))
        return out

    def clear(self) -> None:
        self._parked.clear()


class _Change:
    """A handler's scratch copy of one group plus the records and answers it produced."""

    def __init__(self, group_id: str, live: ClassicGroup | None, now_ms: int) -> None:
        self.group = live.copy() if live is not None else ClassicGroup(group_id, now_ms)
        self.created = live is None
        self._original = None if live is None else live.metadata_record().value
        self.now_ms = now_ms
        # Tombstones of an empty group of another type this classic group replaces.
        self.replaced: list[CoordinatorRecord] = []
        self.records: list[CoordinatorRecord] = []
        self.answers: list[tuple[WaitKey, Any]] = []
        self.reschedule: list[tuple[str, int]] = []  # (member id, delay) session timers to (re)arm
        self.cancel: list[str] = []  # member ids whose session timers stop
        self.timers: list[TimerIntent] = []  # the other timer intents, in order

    # Writes go to the scratch copy and the record list together.
    def put_member(self, member: ClassicGroupMember) -> None:
        self.group.put_member(member)
        self.records.append(member.record(self.group.group_id))

    def remove_member(self, member_id: str) -> None:
        self.group.remove_member(member_id)
        self.records.append(
            CoordinatorRecord(
                rpb.ClassicGroupMemberKey(group_id=self.group.group_id, member_id=member_id), None
            )
        )
        self.cancel.append(member_id)

    def add_pending(self, member_id: str, session_timeout_ms: int) -> None:
        self.group.pending_members[member_id] = session_timeout_ms
        self.records.append(
            CoordinatorRecord(
                rpb.ClassicGroupPendingMemberKey(group_id=self.group.group_id, member_id=member_id),
                rpb.ClassicGroupPendingMemberValue(session_timeout_ms=session_timeout_ms),
            )
        )

    def remove_pending(self, member_id: str) -> None:
        if self.group.pending_members.pop(member_id, None) is not None:
            self.records.append(
                CoordinatorRecord(
                    rpb.ClassicGroupPendingMemberKey(group_id=self.group.group_id, member_id=member_id), None
                )
            )

    def transition_to(self, state: ClassicGroupState) -> None:
        self.group.transition_to(state, self.now_ms)

    def answer(self, kind: str, member_id: str, response: Any) -> None:
        self.answers.append(((kind, self.group.group_id, member_id), response))

    def all_records(self) -> list[CoordinatorRecord]:
        """The member records, then the group metadata if anything group-level changed."""
        meta = self.group.metadata_record()
        if self.created or meta.value != self._original:
            return [*self.replaced, *self.records, meta]
        return list(self.records)


def new_member_id(client_id: str, random_id: uuid.UUID) -> str:
    """The member id the coordinator gives a classic member joining without one (Kafka:
    client id, a dash, a random UUID)."""
    return f"{client_id}-{random_id}"


def _error_join(code: ErrorCode, member_id: str = "") -> pb.JoinGroupResponse:
    return pb.JoinGroupResponse(error_code=code.value, member_id=member_id, generation_id=-1)


def _error_sync(code: ErrorCode) -> pb.SyncGroupResponse:
    return pb.SyncGroupResponse(error_code=code.value)


class ClassicGroupManager:
    """Handlers, timers and replay for classic groups of one state-topic partition."""

    def __init__(
        self,
        groups: dict[str, Group],
        config: GroupConfig,
        delete_other_group: Callable[[Group], list[CoordinatorRecord]] | None = None,
        join_other_group: Callable[[Group, pb.JoinGroupRequest, int], CoordinatorResult[pb.JoinGroupResponse]]
        | None = None,
        new_uuid: Callable[[], uuid.UUID] = uuid.uuid4,
    ) -> None:
        """``new_uuid()`` is where new member ids come from (injected, so a test replays exactly
        what a call returned); ``delete_other_group(group)``: tombstones of an empty group of another type (a
        consumer group) that a JoinGroup replaces with a classic group, as Kafka does;
        ``join_other_group(group, request, now_ms)`` serves a JoinGroup to a non-empty group of
        another type (a classic member inside a consumer group, online migration)."""
        self.groups = groups
        self.config = config
        self.waiters = Waiters()
        self.delete_other_group = delete_other_group or (lambda _group: [])
        self.join_other_group = join_other_group
        self.new_uuid = new_uuid

    # ------------------------------------------------------------------------------ replay
    def replay_metadata(
        self, key: rpb.ClassicGroupMetadataKey, value: rpb.ClassicGroupMetadataValue | None
    ) -> None:
        if value is None:
            self.groups.pop(key.group_id, None)
        else:
            self._group_for_replay(key.group_id).replay_metadata(value)

    def replay_member(
        self, key: rpb.ClassicGroupMemberKey, value: rpb.ClassicGroupMemberValue | None
    ) -> None:
        if value is None:
            group = self.groups.get(key.group_id)
            if isinstance(group, ClassicGroup):
                group.remove_member(key.member_id)
        else:
            self._group_for_replay(key.group_id).replay_member(key.member_id, value)

    def replay_pending_member(
        self, key: rpb.ClassicGroupPendingMemberKey, value: rpb.ClassicGroupPendingMemberValue | None
    ) -> None:
        if value is None:
            group = self.groups.get(key.group_id)
            if isinstance(group, ClassicGroup):
                group.pending_members.pop(key.member_id, None)
        else:
            self._group_for_replay(key.group_id).pending_members[key.member_id] = value.session_timeout_ms

    def _group_for_replay(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            # A classic record for a group of another type replaces it (a conversion writes the
            # other type's tombstones first; Kafka replays the same way).
            group = ClassicGroup(group_id)
            self.groups[group_id] = group
        return group

    def on_loaded(self, now_ms: int) -> CoordinatorResult[None]:
        """After a takeover: arm the timers replay cannot (sessions, rebalances in progress).

        Waiting requests were lost with the old leader; their clients retry, so a group caught
        mid-rebalance just gets a full rebalance timeout (or session timeout) to settle again.
        """
        self.waiters.clear()
        timers: list[TimerIntent] = []
        for group in list(self.groups.values()):
            if not isinstance(group, ClassicGroup):
                continue
            gid = group.group_id
            for member in group.members.values():
                timers.append(self._session_timer(gid, member.member_id, member.session_timeout_ms, now_ms))
            for member_id, session_ms in group.pending_members.items():
                timers.append(
                    deadline_timer(
                        pending_member_key(gid, member_id),
                        session_ms,
                        now_ms,
                        self._expire_pending,
                        gid,
                        member_id,
                    )
                )
            if group.state is State.PREPARING_REBALANCE:
                delay = max(
                    group.rebalance_timeout_ms(), self.config.classic_group_initial_rebalance_delay_ms
                )
                timers.append(deadline_timer(join_key(gid), delay, now_ms, self._expire_join, gid))
            elif group.state is State.COMPLETING_REBALANCE:
                timers.append(self._sync_timer(group, now_ms))
        return CoordinatorResult(timers=timers)

    # ------------------------------------------------------------------------------ results
    def _finish(
        self,
        change: _Change,
        response: Any = None,
        *,
        wait: WaitKey | None = None,
        token: Any = None,
    ) -> CoordinatorResult[Any]:
        """Records, the requester's answer (or PENDING) and completions for parked requests."""
        answers = change.answers
        if wait is not None:
            own = [r for k, r in answers if k == wait]
            if own:
                response = own[-1]
            else:
                self.waiters.park(wait, token)
                response = PENDING
        completions = self.waiters.release(answers)
        gid = change.group.group_id
        timers = list(change.timers)
        timers += [CancelTimer(heartbeat_key(gid, member_id)) for member_id in change.cancel]
        timers += [
            self._session_timer(gid, member_id, delay, change.now_ms)
            for member_id, delay in change.reschedule
            if member_id in change.group.members
        ]
        return CoordinatorResult(
            records=change.all_records(), response=response, completions=completions, timers=timers
        )

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        if not isinstance(group, ClassicGroup):
            # A consumer (KIP-848) group of that name: classic requests do not apply to it.
            raise CoordinatorError(
                ErrorCode.inconsistent_group_protocol, f"{group_id} is not a classic group"
            )
        return group

    # ------------------------------------------------------------------------------ JoinGroup
    def join_group(
        self, request: pb.JoinGroupRequest, now_ms: int, token: Any = None
    ) -> CoordinatorResult[pb.JoinGroupResponse]:
        """JoinGroup v0-9. The answer is usually PENDING: it comes when the join phase ends."""
        if request.api_version == 0:
            # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
            v0 = pb.JoinGroupRequest()
            v0.CopyFrom(request)
            v0.rebalance_timeout_ms = request.session_timeout_ms
            request = v0
        gid = request.group_id
        member_id = request.member_id
        if not gid:
            return CoordinatorResult(response=_error_join(ErrorCode.invalid_group_id, member_id))
        if not (
            self.config.classic_group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.classic_group_max_session_timeout_ms
        ):
            return CoordinatorResult(response=_error_join(ErrorCode.invalid_session_timeout, member_id))
        unknown = member_id == ""
        existing = self.groups.get(gid)
        replaced: list[CoordinatorRecord] = []
        if existing is not None and not isinstance(existing, ClassicGroup):
            if not existing.is_empty():
                if self.join_other_group is not None:
                    return self.join_other_group(existing, request, now_ms)
                return CoordinatorResult(
                    response=_error_join(ErrorCode.inconsistent_group_protocol, member_id)
                )
            if unknown:
                # An empty consumer group becomes a classic group (its offsets stay).
                replaced = self.delete_other_group(existing)
            existing = None
        live = existing
        if live is None and not unknown:
            # A known member id for a group that does not exist: it must rejoin from scratch.
            return CoordinatorResult(response=_error_join(ErrorCode.unknown_member_id, member_id))
        change = _Change(gid, live, now_ms)
        change.replaced = replaced
        group = change.group
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        instance_id = request.group_instance_id if request.HasField("group_instance_id") else None

        if not self._accept_joining_member(group, member_id):
            return CoordinatorResult(response=_error_join(ErrorCode.group_max_size_reached, member_id))
        if group.state is State.DEAD:
            return CoordinatorResult(response=_error_join(ErrorCode.coordinator_not_available, member_id))
        names = [n for n, _ in protocols]
        if not group.supports_protocols(request.protocol_type, names):
            return CoordinatorResult(response=_error_join(ErrorCode.inconsistent_group_protocol, member_id))

        if unknown:
            return self._join_new_member(change, request, protocols, instance_id, token)
        return self._join_existing_member(change, request, protocols, instance_id, token)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size, counted as Kafka does for each state."""
        limit = self.config.classic_group_max_size
        if group.state in (State.EMPTY, State.DEAD):
            return True
        if group.state is State.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (
                member is not None and group.is_awaiting_join(member)
            ) or group.num_awaiting_join() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(
        self,
        change: _Change,
        request: pb.JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        instance_id: str | None,
        token: Any,
    ) -> CoordinatorResult[pb.JoinGroupResponse]:
        group = change.group
        new_id = new_member_id(request.client_id, self.new_uuid())
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return self._rejoin_static_member(change, request, protocols, old_id, new_id, token)
            self._add_member(change, request, protocols, new_id, instance_id)
            return self._finish(change, wait=("join", group.group_id, new_id), token=token)
        if request.api_version >= JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION:
            # KIP-394: hand out the id first; the member joins with it in its next request.
            change.add_pending(new_id, request.session_timeout_ms)
            change.timers.append(
                deadline_timer(
                    pending_member_key(group.group_id, new_id),
                    request.session_timeout_ms,
                    change.now_ms,
                    self._expire_pending,
                    group.group_id,
                    new_id,
                )
            )
            return self._finish(change, _error_join(ErrorCode.member_id_required, new_id))
        self._add_member(change, request, protocols, new_id, None)
        return self._finish(change, wait=("join", group.group_id, new_id), token=token)

    def _join_existing_member(
        self,
        change: _Change,
        request: pb.JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        instance_id: str | None,
        token: Any,
    ) -> CoordinatorResult[pb.JoinGroupResponse]:
        group = change.group
        member_id = request.member_id
        wait: WaitKey = ("join", group.group_id, member_id)
        if member_id in group.pending_members:
            # The second JoinGroup of KIP-394's two-step join.
            self._add_member(change, request, protocols, member_id, instance_id)
            return self._finish(change, wait=wait, token=token)
        try:
            group.validate_member(member_id, instance_id)
        except CoordinatorError as e:
            return self._finish(change, _error_join(e.code, member_id))
        member = group.members[member_id]
        if group.state is State.PREPARING_REBALANCE:
            self._update_member(change, member, request, protocols)
            return self._finish(change, wait=wait, token=token)
        if group.state is State.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member lost its JoinGroup answer: send it again (to any earlier, still
                # waiting request of it as well).
                response = self._join_response(group, member)
                change.answer("join", member_id, response)
                return self._finish(change, response)
            self._update_member(change, member, request, protocols)
            return self._finish(change, wait=wait, token=token)
        if group.state is State.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining (e.g. metadata changed) or new protocols: rebalance.
                self._update_member(change, member, request, protocols)
                return self._finish(change, wait=wait, token=token)
            response = self._join_response(group, member)
            change.answer("join", member_id, response)
            return self._finish(change, response)
        # Empty: no member can be known.
        return self._finish(change, _error_join(ErrorCode.unknown_member_id, member_id))

    def _rejoin_static_member(
        self,
        change: _Change,
        request: pb.JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        old_id: str,
        new_id: str,
        token: Any,
    ) -> CoordinatorResult[pb.JoinGroupResponse]:
        """KIP-345: a static member restarted (unknown member id, known instance id).

        The old member id is fenced (its waiting requests get FENCED_INSTANCE_ID); the new id
        takes over the assignment. In Stable, when the selected protocol stays the same, no
        rebalance happens: the member gets the current generation back.
        """
        group = change.group
        old = group.members[old_id]
        was_leader = group.is_leader(old_id)
        fenced = ErrorCode.fenced_instance_id
        change.answer("join", old_id, _error_join(fenced, old_id))
        change.answer("sync", old_id, _error_sync(fenced))
        change.remove_member(old_id)
        new = ClassicGroupMember(
            member_id=new_id,
            group_instance_id=old.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=protocols,
            assignment=old.assignment,
            joined_generation=old.joined_generation,
            is_new=False,
        )
        change.put_member(new)
        if was_leader:
            group.leader_id = new_id
        wait: WaitKey = ("join", group.group_id, new_id)
        if group.state is State.STABLE:
            if group.protocol_name is not None and group.select_protocol() == group.protocol_name:
                change.reschedule.append((new_id, new.session_timeout_ms))
                skip = request.api_version >= _JOIN_SKIP_ASSIGNMENT_VERSION and was_leader
                response = pb.JoinGroupResponse(
                    error_code=0,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=group.leader_id or "",
                    skip_assignment=skip,
                    member_id=new_id,
                    members=self._leader_members(group) if skip else [],
                )
                return self._finish(change, response)
            self._update_member(change, new, request, protocols)
            return self._finish(change, wait=wait, token=token)
        # PreparingRebalance: join as usual; CompletingRebalance: the old id never got its
        # JoinGroup answer for this generation, so a new rebalance is needed.
        self._update_member(change, new, request, protocols)
        return self._finish(change, wait=wait, token=token)

    def _add_member(
        self,
        change: _Change,
        request: pb.JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
        member_id: str,
        instance_id: str | None,
    ) -> None:
        group = change.group
        change.remove_pending(member_id)
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=protocols,
            joined_generation=group.generation_id + 1,
            is_new=True,
        )
        change.put_member(member)
        change.timers.append(CancelTimer(pending_member_key(group.group_id, member_id)))
        # A new member cannot heartbeat before its JoinGroup answer; a lost answer would leave a
        # defunct member behind, so new members expire on Kafka's new-member join timeout.
        change.reschedule.append((member_id, self.config.classic_group_new_member_join_timeout_ms))
        self._prepare_rebalance_or_complete_join(change)

    def _update_member(
        self,
        change: _Change,
        member: ClassicGroupMember,
        request: pb.JoinGroupRequest,
        protocols: tuple[tuple[str, bytes], ...],
    ) -> None:
        group = change.group
        change.put_member(
            ClassicGroupMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                session_timeout_ms=request.session_timeout_ms,
                protocol_type=request.protocol_type,
                protocols=protocols,
                assignment=member.assignment,
                # Joins the rebalance that will produce the next generation.
                joined_generation=group.generation_id + 1,
                is_new=False,
            )
        )
        self._prepare_rebalance_or_complete_join(change)

    def _prepare_rebalance_or_complete_join(self, change: _Change) -> None:
        if change.group.state in (State.STABLE, State.COMPLETING_REBALANCE, State.EMPTY):
            self._prepare_rebalance(change)
        else:
            self._maybe_complete_join(change)

    def _prepare_rebalance(self, change: _Change) -> None:
        group = change.group
        if group.state is State.COMPLETING_REBALANCE:
            # Members waiting for the leader's assignment must rejoin instead.
            for m in list(group.members.values()):
                if m.assignment:
                    change.put_member(with_assignment(m, b""))
                change.answer("sync", m.member_id, _error_sync(ErrorCode.rebalance_in_progress))
        initial = group.state is State.EMPTY
        change.transition_to(State.PREPARING_REBALANCE)
        gid = group.group_id
        if initial:
            delay = self.config.classic_group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            change.timers.append(
                self._initial_join_timer(gid, delay, remaining, frozenset(group.members), change.now_ms)
            )
        else:
            change.timers.append(
                deadline_timer(
                    join_key(gid), group.rebalance_timeout_ms(), change.now_ms, self._expire_join, gid
                )
            )
            self._maybe_complete_join(change)

    def _maybe_complete_join(self, change: _Change) -> None:
        group = change.group
        if (
            group.state is State.PREPARING_REBALANCE
            and group.has_all_members_joined()
            and group.previous_state is not State.EMPTY
        ):
            self._complete_join(change)

    def _complete_join(self, change: _Change) -> None:
        """End the join phase: drop members that did not rejoin, start the next generation,
        answer every JoinGroup (the leader gets the members and their metadata)."""
        group = change.group
        if group.state is not State.PREPARING_REBALANCE:
            return
        change.timers.append(CancelTimer(join_key(group.group_id)))
        for m in group.not_yet_rejoined():
            change.answer("join", m.member_id, _error_join(ErrorCode.unknown_member_id, m.member_id))
            change.remove_member(m.member_id)
        for member_id in list(group.pending_members):
            change.remove_pending(member_id)
        if group.members:
            group.generation_id += 1
            group.protocol_name = group.select_protocol()
            change.transition_to(State.COMPLETING_REBALANCE)
            for m in group.members.values():
                change.answer("join", m.member_id, self._join_response(group, m))
                change.reschedule.append((m.member_id, m.session_timeout_ms))
            change.timers.append(self._sync_timer(group, change.now_ms))
        else:
            group.generation_id += 1
            group.protocol_name = None
            group.leader_id = None
            change.transition_to(State.EMPTY)

    def _leader_members(self, group: ClassicGroup) -> list[pb.JoinGroupResponseMember]:
        out = []
        for m in group.members.values():
            rm = pb.JoinGroupResponseMember(member_id=m.member_id, metadata=m.metadata(group.protocol_name))
            if m.group_instance_id is not None:
                rm.group_instance_id = m.group_instance_id
            out.append(rm)
        return out

    def _join_response(self, group: ClassicGroup, member: ClassicGroupMember) -> pb.JoinGroupResponse:
        """The JoinGroup answer for the current generation (the leader gets the member list)."""
        leader = group.is_leader(member.member_id)
        response = pb.JoinGroupResponse(
            error_code=0,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=self._leader_members(group) if leader else [],
        )
        if group.protocol_name is not None:
            response.protocol_name = group.protocol_name
        return response

    # ------------------------------------------------------------------------------ SyncGroup
    def sync_group(
        self, request: pb.SyncGroupRequest, now_ms: int, token: Any = None
    ) -> CoordinatorResult[pb.SyncGroupResponse]:
        """SyncGroup v0-5: the leader's assignments go to every member; followers that arrive
        first wait (PENDING) for them."""
        gid = request.group_id
        if not gid:
            return CoordinatorResult(response=_error_sync(ErrorCode.invalid_group_id))
        try:
            live = self._classic(gid)
        except CoordinatorError:
            return CoordinatorResult(response=_error_sync(ErrorCode.unknown_member_id))
        if live is None:
            return CoordinatorResult(response=_error_sync(ErrorCode.unknown_member_id))
        instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
        try:
            if live.state is State.DEAD:
                raise CoordinatorError(ErrorCode.coordinator_not_available)
            live.validate_member(request.member_id, instance_id)
            if request.generation_id != live.generation_id:
                raise CoordinatorError(ErrorCode.illegal_generation)
            if request.HasField("protocol_type") and request.protocol_type != live.protocol_type:
                raise CoordinatorError(ErrorCode.inconsistent_group_protocol)
            if request.HasField("protocol_name") and request.protocol_name != (live.protocol_name or ""):
                raise CoordinatorError(ErrorCode.inconsistent_group_protocol)
            if live.state is State.EMPTY:
                raise CoordinatorError(ErrorCode.unknown_member_id)
            if live.state is State.PREPARING_REBALANCE:
                raise CoordinatorError(ErrorCode.rebalance_in_progress)
        except CoordinatorError as e:
            return CoordinatorResult(response=_error_sync(e.code))

        change = _Change(gid, live, now_ms)
        group = change.group
        member_id = request.member_id
        if group.state is State.STABLE:
            change.reschedule.append((member_id, group.members[member_id].session_timeout_ms))
            response = self._sync_response(group, group.members[member_id])
            change.answer("sync", member_id, response)
            return self._finish(change, response)
        # CompletingRebalance.
        wait: WaitKey = ("sync", gid, member_id)
        if not group.is_leader(member_id):
            # Waiting for the leader counts as being alive (Kafka: awaiting sync satisfies the
            # heartbeat) for up to the rebalance timeout.
            member = group.members[member_id]
            change.reschedule.append((member_id, max(member.rebalance_timeout_ms, member.session_timeout_ms)))
            return self._finish(change, wait=wait, token=token)
        assignments = {a.member_id: a.assignment for a in request.assignments}
        for m in list(group.members.values()):
            assignment = assignments.get(m.member_id, b"")
            if m.assignment != assignment:
                change.put_member(with_assignment(m, assignment))
        change.transition_to(State.STABLE)
        for m in group.members.values():
            change.answer("sync", m.member_id, self._sync_response(group, m))
            change.reschedule.append((m.member_id, m.session_timeout_ms))
        return self._finish(change, wait=wait, token=token)

    def _sync_response(self, group: ClassicGroup, member: ClassicGroupMember) -> pb.SyncGroupResponse:
        response = pb.SyncGroupResponse(
            error_code=0, protocol_type=group.protocol_type, assignment=member.assignment
        )
        if group.protocol_name is not None:
            response.protocol_name = group.protocol_name
        return response

    # ------------------------------------------------------------------------------ Heartbeat
    def heartbeat(self, request: pb.HeartbeatRequest, now_ms: int) -> CoordinatorResult[pb.HeartbeatResponse]:
        """Heartbeat v0-4: keeps the session; REBALANCE_IN_PROGRESS tells a member to rejoin."""
        try:
            group = self._classic(request.group_id)
        except CoordinatorError:
            return CoordinatorResult(
                response=pb.HeartbeatResponse(error_code=ErrorCode.unknown_member_id.value)
            )
        instance_id = request.group_instance_id if request.HasField("group_instance_id") else None
        try:
            if group is None:
                raise CoordinatorError(ErrorCode.unknown_member_id)
            if group.state is State.DEAD:
                raise CoordinatorError(ErrorCode.coordinator_not_available)
            group.validate_member(request.member_id, instance_id)
            if request.generation_id != group.generation_id:
                raise CoordinatorError(ErrorCode.illegal_generation)
            if group.state is State.EMPTY:
                raise CoordinatorError(ErrorCode.unknown_member_id)
        except CoordinatorError as e:
            return CoordinatorResult(response=pb.HeartbeatResponse(error_code=e.code.value))
        member = group.members[request.member_id]
        code = ErrorCode.rebalance_in_progress if group.state is State.PREPARING_REBALANCE else ErrorCode.none
        return CoordinatorResult(
            response=pb.HeartbeatResponse(error_code=code.value),
            timers=[self._session_timer(group.group_id, member.member_id, member.session_timeout_ms, now_ms)],
        )

    # ------------------------------------------------------------------------------ LeaveGroup
    def leave_group(
        self, request: pb.LeaveGroupRequest, now_ms: int
    ) -> CoordinatorResult[pb.LeaveGroupResponse]:
        """LeaveGroup v0-5: a batch of members, by member id and/or group instance id."""
        try:
            live = self._classic(request.group_id)
        except CoordinatorError:
            live = None
        if live is None:
            return CoordinatorResult(
                response=pb.LeaveGroupResponse(error_code=ErrorCode.unknown_member_id.value)
            )
        if live.state is State.DEAD:
            return CoordinatorResult(
                response=pb.LeaveGroupResponse(error_code=ErrorCode.coordinator_not_available.value)
            )
        change = _Change(request.group_id, live, now_ms)
        group = change.group
        results: list[pb.LeaveGroupMemberResponse] = []
        for leaving in request.members:
            instance_id = leaving.group_instance_id if leaving.HasField("group_instance_id") else None
            result = pb.LeaveGroupMemberResponse(member_id=leaving.member_id)
            if instance_id is not None:
                result.group_instance_id = instance_id
            code = ErrorCode.none
            if instance_id is not None:
                existing = group.static_member_id(instance_id)
                if existing is None:
                    code = ErrorCode.unknown_member_id
                elif leaving.member_id and leaving.member_id != existing:
                    code = ErrorCode.fenced_instance_id
                else:
                    self._remove_member_and_rebalance(change, existing)
            elif leaving.member_id in group.pending_members:
                change.remove_pending(leaving.member_id)
                change.timers.append(CancelTimer(pending_member_key(group.group_id, leaving.member_id)))
                self._maybe_complete_join(change)
            elif leaving.member_id in group.members:
                self._remove_member_and_rebalance(change, leaving.member_id)
            else:
                code = ErrorCode.unknown_member_id
            result.error_code = code.value
            results.append(result)
        top = ErrorCode.none
        if request.api_version < 3 and results:
            top = ErrorCode(results[0].error_code)
        return self._finish(change, pb.LeaveGroupResponse(error_code=top.value, members=results))

    def _remove_member_and_rebalance(self, change: _Change, member_id: str) -> None:
        """Kafka's removeMemberAndUpdateClassicGroup: a waiting JoinGroup of the leaving member
        gets UNKNOWN_MEMBER_ID (it retries if still alive), then the group rebalances."""
        group = change.group
        change.answer("join", member_id, _error_join(ErrorCode.unknown_member_id, member_id))
        change.answer("sync", member_id, _error_sync(ErrorCode.unknown_member_id))
        change.remove_member(member_id)
        if group.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self._prepare_rebalance(change)
        elif group.state is State.PREPARING_REBALANCE:
            self._maybe_complete_join(change)

    # ------------------------------------------------------------------------------ timers
    # Each timer is a deadline_timer(key, delay, now, expire, *args): its operation runs
    # ``expire(*args, deadline)`` and re-validates the group, which may have moved since.
    def _session_timer(self, group_id: str, member_id: str, delay_ms: int, now_ms: int) -> ScheduleTimer:
        return deadline_timer(
            heartbeat_key(group_id, member_id), delay_ms, now_ms, self._expire_session, group_id, member_id
        )

    def _sync_timer(self, group: ClassicGroup, now_ms: int) -> ScheduleTimer:
        """The leader must deliver the assignments of this generation within the rebalance timeout."""
        return deadline_timer(
            sync_key(group.group_id),
            group.rebalance_timeout_ms(),
            now_ms,
            self._expire_sync,
            group.group_id,
            group.generation_id,
        )

    def _initial_join_timer(
        self, group_id: str, delay_ms: int, remaining_ms: int, seen: frozenset[str], now_ms: int
    ) -> ScheduleTimer:
        return deadline_timer(
            join_key(group_id),
            delay_ms,
            now_ms,
            self._expire_initial_join,
            group_id,
            delay_ms,
            remaining_ms,
            seen,
        )

    def _expire_session(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or member_id not in group.members:
            return CoordinatorResult()
        member = group.members[member_id]
        if group.is_awaiting_join(member) and not member.is_new:
            # Waiting in JoinGroup counts as alive until the join phase ends (rebalance timeout).
            return CoordinatorResult(
                timers=[self._session_timer(group_id, member_id, member.session_timeout_ms, now_ms)]
            )
        change = _Change(group_id, group, now_ms)
        self._remove_member_and_rebalance(change, member_id)
        return self._finish(change)

    def _expire_sync(self, group_id: str, generation_id: int, now_ms: int) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        if (
            not isinstance(group, ClassicGroup)
            or group.state is not State.COMPLETING_REBALANCE
            or group.generation_id != generation_id
            or group.leader_id is None
        ):
            return CoordinatorResult()
        change = _Change(group_id, group, now_ms)
        self._remove_member_and_rebalance(change, group.leader_id)
        return self._finish(change)

    def _expire_pending(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or member_id not in group.pending_members:
            return CoordinatorResult()
        change = _Change(group_id, group, now_ms)
        change.remove_pending(member_id)
        self._maybe_complete_join(change)
        return self._finish(change)

    def _expire_join(self, group_id: str, now_ms: int) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or group.state is not State.PREPARING_REBALANCE:
            return CoordinatorResult()
        change = _Change(group_id, group, now_ms)
        self._complete_join(change)
        return self._finish(change)

    def _expire_initial_join(
        self, group_id: str, delay_ms: int, remaining_ms: int, seen: frozenset[str], now_ms: int
    ) -> CoordinatorResult[None]:
        """group.initial.rebalance.delay.ms: while new members keep arriving, wait another
        delay, up to the group's rebalance timeout in total (Kafka's InitialDelayedJoin)."""
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or group.state is not State.PREPARING_REBALANCE:
            return CoordinatorResult()
        current = frozenset(group.members)
        if current - seen and remaining_ms > 0:
            new_delay = min(self.config.classic_group_initial_rebalance_delay_ms, remaining_ms)
            again = self._initial_join_timer(
                group_id, new_delay, max(remaining_ms - delay_ms, 0), current, now_ms
            )
            return CoordinatorResult(timers=[again])
        change = _Change(group_id, group, now_ms)
        self._complete_join(change)
        return self._finish(change)

    # ------------------------------------------------------------------------------ migration
    def create_converted_group(
        self,
        group_id: str,
        generation_id: int,
        members: list[ClassicGroupMember],
        now_ms: int,
        *,
        rebalance: bool,
    ) -> CoordinatorResult[None]:
        """A classic group settled in ``generation_id`` with these members and assignments (a
        consumer group converting back, see migration/online_migration.py); with ``rebalance`` it then
        prepares a rebalance, as Kafka does when a leaving member caused the conversion."""
        change = _Change(group_id, None, now_ms)
        group = change.group
        group.protocol_type = members[0].protocol_type if members else ""
        group.generation_id = generation_id
        for m in members:
            change.put_member(m)
        if group.members:
            group.protocol_name = group.select_protocol()
            group.previous_state = State.COMPLETING_REBALANCE
            group.state = State.STABLE
            group.state_timestamp_ms = now_ms
            for m in group.members.values():
                change.reschedule.append((m.member_id, m.session_timeout_ms))
            if rebalance:
                self._prepare_rebalance(change)
        return self._finish(change)

    # ------------------------------------------------------------------------------ admin
    def simple_group_records(self, group_id: str, now_ms: int) -> list[CoordinatorRecord]:
        """Records creating an empty classic group without protocol type (a "simple" group that
        only stores offsets: commits with generation -1 to a group that does not exist)."""
        return [ClassicGroup(group_id, now_ms).metadata_record()]
