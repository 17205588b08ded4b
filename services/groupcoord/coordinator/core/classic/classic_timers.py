"""The keys of a classic group's timers: a session per member, the sync deadline of the leader,
the join phase (rebalance timeout or initial delay) and one per pending member id (KIP-394).
The operations that fire live with the rebalance (classic/rebalance.py)."""

from __future__ import annotations


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"classic-heartbeat-{group_id}-{member_id}"


def sync_key(group_id: str) -> str:
    return f"classic-sync-{group_id}"


def join_key(group_id: str) -> str:
    return f"classic-join-{group_id}"


def pending_member_key(group_id: str, member_id: str) -> str:
    return f"classic-pending-member-{group_id}-{member_id}"
