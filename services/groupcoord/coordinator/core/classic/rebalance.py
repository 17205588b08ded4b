"""A classic group's rebalance: the join phase, the completion of a generation, and its timers.

Kafka's ``prepareRebalance`` / ``maybeCompleteJoinPhase`` / ``completeClassicGroupJoin`` and the
timeouts that drive them, sans-IO:

* Timers: a session timer per member, the join-phase timer (rebalance timeout, or the initial
  rebalance delay for a group that starts empty), the leader's sync deadline and one per
  pending member id. Nothing here arms or cancels one: each is an intent
  (:func:`~groupcoord.coordinator.core.contract.deadline_timer`) returned in
  ``CoordinatorResult.timers``; its operation runs at its deadline, which it knows (``now_ms``
  of scheduling + delay), and re-validates the group, which may have moved since.
* :func:`finish` turns a :class:`GroupChange` into the handler's result: its records, the
  requester's answer (or PENDING, parking the request) and the completions of parked requests.

Pending sync: Kafka removes members that have not sent SyncGroup a rebalance timeout after the
join phase. Follower syncs write no records here, so only the case that can wedge a group is
handled: a leader that never delivers assignments (while its followers keep heartbeating) is
removed when the sync timer fires in CompletingRebalance, and the group rebalances.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.classic.classic_context import ClassicContext, GroupChange
from groupcoord.coordinator.core.classic.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    with_assignment,
)
from groupcoord.coordinator.core.classic.classic_timers import (
    heartbeat_key,
    join_key,
    pending_member_key,
    sync_key,
)
from groupcoord.coordinator.core.classic.responses import error_join, error_sync, join_response
from groupcoord.coordinator.core.classic.waiters import WaitKey
from groupcoord.coordinator.core.contract import (
    PENDING,
    CancelTimer,
    CoordinatorResult,
    ScheduleTimer,
    TimerIntent,
    deadline_timer,
)

State = ClassicGroupState
_log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------- results
def finish(
    ctx: ClassicContext,
    change: GroupChange,
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
            ctx.waiters.park(wait, token)
            response = PENDING
    completions = ctx.waiters.release(answers)
    gid = change.group.group_id
    timers = list(change.timers)
    timers += [CancelTimer(heartbeat_key(gid, member_id)) for member_id in change.cancel]
    timers += [
        session_timer(ctx, gid, member_id, delay, change.now_ms)
        for member_id, delay in change.reschedule
        if member_id in change.group.members
    ]
    return CoordinatorResult(
        records=change.all_records(), response=response, completions=completions, timers=timers
    )


# ---------------------------------------------------------------------------------- rebalance
def client_reason(request: Any) -> str:
    """The reason a client gives for joining or leaving (JoinGroup v8+, LeaveGroup v5+: KIP-800),
    as Kafka logs it."""
    return request.reason if request.HasField("reason") and request.reason else "not provided"


def prepare_rebalance_or_complete_join(ctx: ClassicContext, change: GroupChange, reason: str) -> None:
    if change.group.state in (State.STABLE, State.COMPLETING_REBALANCE, State.EMPTY):
        prepare_rebalance(ctx, change, reason)
    else:
        maybe_complete_join(ctx, change)


def prepare_rebalance(ctx: ClassicContext, change: GroupChange, reason: str) -> None:
    """Start a join phase. Logged with its reason in Kafka's words: a group that keeps
    rebalancing is diagnosed from these lines (which member, why, in which state)."""
    group = change.group
    _log.info(
        "Preparing to rebalance group %s in state %s with old generation %d (reason: %s).",
        group.group_id,
        group.state.value,
        group.generation_id,
        reason,
    )
    if group.state is State.COMPLETING_REBALANCE:
        # Members waiting for the leader's assignment must rejoin instead.
        for m in list(group.members.values()):
            if m.assignment:
                change.put_member(with_assignment(m, b""))
            change.answer("sync", m.member_id, error_sync(ErrorCode.rebalance_in_progress))
    initial = group.state is State.EMPTY
    change.transition_to(State.PREPARING_REBALANCE)
    gid = group.group_id
    if initial:
        change.timers.append(initial_join_timer(ctx, group, change.now_ms))
    else:
        change.timers.append(join_timer(ctx, gid, group.rebalance_timeout_ms(), change.now_ms))
        maybe_complete_join(ctx, change)


def maybe_complete_join(ctx: ClassicContext, change: GroupChange) -> None:
    group = change.group
    if (
        group.state is State.PREPARING_REBALANCE
        and group.has_all_members_joined()
        and group.previous_state is not State.EMPTY
    ):
        complete_join(ctx, change)


def complete_join(ctx: ClassicContext, change: GroupChange) -> None:
    """End the join phase: drop members that did not rejoin, start the next generation,
    answer every JoinGroup (the leader gets the members and their metadata)."""
    group = change.group
    if group.state is not State.PREPARING_REBALANCE:
        return
    change.timers.append(CancelTimer(join_key(group.group_id)))
    for m in group.not_yet_rejoined():
        change.answer("join", m.member_id, error_join(ErrorCode.unknown_member_id, m.member_id))
        change.remove_member(m.member_id)
    for member_id in list(group.pending_members):
        change.remove_pending(member_id)
    if group.members:
        group.generation_id += 1
        group.protocol_name = group.select_protocol()
        change.transition_to(State.COMPLETING_REBALANCE)
        for m in group.members.values():
            change.answer("join", m.member_id, join_response(group, m))
            change.reschedule.append((m.member_id, m.session_timeout_ms))
        change.timers.append(_sync_timer(ctx, group, change.now_ms))
    else:
        group.generation_id += 1
        group.protocol_name = None
        group.leader_id = None
        change.transition_to(State.EMPTY)


def remove_member_and_rebalance(
    ctx: ClassicContext, change: GroupChange, member_id: str, reason: str
) -> None:
    """Kafka's removeMemberAndUpdateClassicGroup: a waiting JoinGroup of the leaving member
    gets UNKNOWN_MEMBER_ID (it retries if still alive), then the group rebalances."""
    group = change.group
    change.answer("join", member_id, error_join(ErrorCode.unknown_member_id, member_id))
    change.answer("sync", member_id, error_sync(ErrorCode.unknown_member_id))
    change.remove_member(member_id)
    if group.state in (State.STABLE, State.COMPLETING_REBALANCE):
        prepare_rebalance(ctx, change, reason)
    elif group.state is State.PREPARING_REBALANCE:
        maybe_complete_join(ctx, change)


def create_converted_group(
    ctx: ClassicContext,
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
    change = GroupChange(group_id, None, now_ms)
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
            prepare_rebalance(ctx, change, f"Downgrade group {group_id} from consumer to classic.")
    return finish(ctx, change)


# ---------------------------------------------------------------------------------- timers
# Each timer is a deadline_timer(key, delay, now, expire, ctx, *args): its operation runs
# ``expire(ctx, *args, deadline)`` and re-validates the group, which may have moved since.
def session_timer(
    ctx: ClassicContext, group_id: str, member_id: str, delay_ms: int, now_ms: int
) -> ScheduleTimer:
    return deadline_timer(
        heartbeat_key(group_id, member_id), delay_ms, now_ms, _expire_session, ctx, group_id, member_id
    )


def pending_member_timer(
    ctx: ClassicContext, group_id: str, member_id: str, delay_ms: int, now_ms: int
) -> ScheduleTimer:
    """A member id handed out by KIP-394's first JoinGroup expires unless it joins with it."""
    return deadline_timer(
        pending_member_key(group_id, member_id), delay_ms, now_ms, _expire_pending, ctx, group_id, member_id
    )


def join_timer(ctx: ClassicContext, group_id: str, delay_ms: int, now_ms: int) -> ScheduleTimer:
    """The join phase ends at the latest after ``delay_ms`` (the rebalance timeout)."""
    return deadline_timer(join_key(group_id), delay_ms, now_ms, _expire_join, ctx, group_id)


def _sync_timer(ctx: ClassicContext, group: ClassicGroup, now_ms: int) -> ScheduleTimer:
    """The leader must deliver the assignments of this generation within the rebalance timeout."""
    return deadline_timer(
        sync_key(group.group_id),
        group.rebalance_timeout_ms(),
        now_ms,
        _expire_sync,
        ctx,
        group.group_id,
        group.generation_id,
    )


def initial_join_timer(ctx: ClassicContext, group: ClassicGroup, now_ms: int) -> ScheduleTimer:
    """The join phase of a group that was empty: it ends once group.initial.rebalance.delay.ms
    passes with nobody new, at the latest after the group's rebalance timeout."""
    delay = ctx.config.classic_group_initial_rebalance_delay_ms
    remaining = max(group.rebalance_timeout_ms() - delay, 0)
    return _initial_join_timer(ctx, group.group_id, delay, remaining, frozenset(group.members), now_ms)


def _initial_join_timer(
    ctx: ClassicContext, group_id: str, delay_ms: int, remaining_ms: int, seen: frozenset[str], now_ms: int
) -> ScheduleTimer:
    return deadline_timer(
        join_key(group_id),
        delay_ms,
        now_ms,
        _expire_initial_join,
        ctx,
        group_id,
        delay_ms,
        remaining_ms,
        seen,
    )


def _expire_session(
    ctx: ClassicContext, group_id: str, member_id: str, now_ms: int
) -> CoordinatorResult[None]:
    group = ctx.groups.get(group_id)
    if not isinstance(group, ClassicGroup) or member_id not in group.members:
        return CoordinatorResult()
    member = group.members[member_id]
    if group.is_awaiting_join(member) and not member.is_new:
        # Waiting in JoinGroup counts as alive until the join phase ends (rebalance timeout).
        return CoordinatorResult(
            timers=[session_timer(ctx, group_id, member_id, member.session_timeout_ms, now_ms)]
        )
    change = GroupChange(group_id, group, now_ms)
    remove_member_and_rebalance(ctx, change, member_id, f"Removing member {member_id} on heartbeat expiration.")
    return finish(ctx, change)


def _expire_sync(
    ctx: ClassicContext, group_id: str, generation_id: int, now_ms: int
) -> CoordinatorResult[None]:
    group = ctx.groups.get(group_id)
    if (
        not isinstance(group, ClassicGroup)
        or group.state is not State.COMPLETING_REBALANCE
        or group.generation_id != generation_id
        or group.leader_id is None
    ):
        return CoordinatorResult()
    change = GroupChange(group_id, group, now_ms)
    remove_member_and_rebalance(
        ctx,
        change,
        group.leader_id,
        f"Removing leader {group.leader_id} which did not send its SyncGroup within the rebalance timeout.",
    )
    return finish(ctx, change)


def _expire_pending(
    ctx: ClassicContext, group_id: str, member_id: str, now_ms: int
) -> CoordinatorResult[None]:
    group = ctx.groups.get(group_id)
    if not isinstance(group, ClassicGroup) or member_id not in group.pending_members:
        return CoordinatorResult()
    change = GroupChange(group_id, group, now_ms)
    change.remove_pending(member_id)
    maybe_complete_join(ctx, change)
    return finish(ctx, change)


def _expire_join(ctx: ClassicContext, group_id: str, now_ms: int) -> CoordinatorResult[None]:
    group = ctx.groups.get(group_id)
    if not isinstance(group, ClassicGroup) or group.state is not State.PREPARING_REBALANCE:
        return CoordinatorResult()
    change = GroupChange(group_id, group, now_ms)
    complete_join(ctx, change)
    return finish(ctx, change)


def _expire_initial_join(
    ctx: ClassicContext, group_id: str, delay_ms: int, remaining_ms: int, seen: frozenset[str], now_ms: int
) -> CoordinatorResult[None]:
    """group.initial.rebalance.delay.ms: while new members keep arriving, wait another
    delay, up to the group's rebalance timeout in total (Kafka's InitialDelayedJoin)."""
    group = ctx.groups.get(group_id)
    if not isinstance(group, ClassicGroup) or group.state is not State.PREPARING_REBALANCE:
        return CoordinatorResult()
    current = frozenset(group.members)
    if current - seen and remaining_ms > 0:
        new_delay = min(ctx.config.classic_group_initial_rebalance_delay_ms, remaining_ms)
        again = _initial_join_timer(
            ctx, group_id, new_delay, max(remaining_ms - delay_ms, 0), current, now_ms
        )
        return CoordinatorResult(timers=[again])
    change = GroupChange(group_id, group, now_ms)
    complete_join(ctx, change)
    return finish(ctx, change)


def timers_after_load(ctx: ClassicContext, now_ms: int) -> CoordinatorResult[None]:
    """After a takeover: arm the timers replay cannot (sessions, rebalances in progress).

    Waiting requests were lost with the old leader (or, after a revert, dropped by
    ``GroupCoordinatorShard.restore``); their clients retry, so a group caught mid-rebalance
    just gets a full rebalance timeout (or session timeout) to settle again.
    """
    timers: list[TimerIntent] = []
    for group in list(ctx.groups.values()):
        if not isinstance(group, ClassicGroup):
            continue
        gid = group.group_id
        for member in group.members.values():
            timers.append(session_timer(ctx, gid, member.member_id, member.session_timeout_ms, now_ms))
        for member_id, session_ms in group.pending_members.items():
            timers.append(pending_member_timer(ctx, gid, member_id, session_ms, now_ms))
        if group.state is State.PREPARING_REBALANCE and group.previous_state is State.EMPTY:
            # a group forming when the leader changed forms again as a new one does: its
            # members' JoinGroups are answered once the initial delay passes with nobody new
            # (waiting for the rebalance timeout instead held them for minutes: librdkafka's
            # is max.poll.interval.ms, 300 s by default, and no member completes this join
            # early, as with Kafka a group that was empty never does)
            timers.append(initial_join_timer(ctx, group, now_ms))
        elif group.state is State.PREPARING_REBALANCE:
            # members rejoin and the join completes once all have (maybe_complete_join); one
            # that never does is dropped when the rebalance timeout ends the join phase
            delay = max(group.rebalance_timeout_ms(), ctx.config.classic_group_initial_rebalance_delay_ms)
            timers.append(join_timer(ctx, gid, delay, now_ms))
        elif group.state is State.COMPLETING_REBALANCE:
            timers.append(_sync_timer(ctx, group, now_ms))
    return CoordinatorResult(timers=timers)
