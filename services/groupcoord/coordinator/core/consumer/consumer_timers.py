"""The timers of consumer group members: their keys, and what ends them all.

A member has a session timer, a rebalance timer while it must revoke, and — a classic member
inside a consumer group — a rejoin and a sync deadline; the group has the batched assignment's
timer. The keys name the partition's timers (the runtime keeps one per key); the operations
that fire live with the members' fencing (consumer/consumer_membership.py) and the batched
assignment (consumer/assignment.py)."""

from __future__ import annotations

from groupcoord.coordinator.core.contract import CancelTimer, TimerIntent


def session_timer_key(group_id: str, member_id: str) -> str:
    return f"consumer-session:{group_id}:{member_id}"


def rebalance_timer_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance:{group_id}:{member_id}"


def assignment_timer_key(group_id: str) -> str:
    return f"consumer-assignment:{group_id}"


def classic_join_timer_key(group_id: str, member_id: str) -> str:
    """A classic member told to rejoin must do so within its rebalance timeout."""
    return f"consumer-classic-join:{group_id}:{member_id}"


def classic_sync_timer_key(group_id: str, member_id: str) -> str:
    """A classic member that joined must sync within its rebalance timeout."""
    return f"consumer-classic-sync:{group_id}:{member_id}"


def member_timer_cancels(group_id: str, member_id: str) -> list[TimerIntent]:
    """Ending every timer of a member that leaves the group (or the consumer protocol)."""
    return [
        CancelTimer(key)
        for key in (
            session_timer_key(group_id, member_id),
            rebalance_timer_key(group_id, member_id),
            classic_join_timer_key(group_id, member_id),
            classic_sync_timer_key(group_id, member_id),
        )
    ]
