"""Parked JoinGroup and SyncGroup requests: the classic protocol's delayed answers.

A JoinGroup or SyncGroup often cannot be answered at once: members wait for each other. The
handler then returns ``response=PENDING`` and parks the request's ``token`` under a wait key
``("join"|"sync", group_id, member_id)``; whichever later request or timer settles the
rebalance returns the answers as ``completions`` ``(token, response)`` (see
:class:`~groupcoord.coordinator.core.contract.CoordinatorResult`). Parked tokens are
connections, not state: they are not replayed and die with the partition's leadership.
"""

from __future__ import annotations

from typing import Any

WaitKey = tuple[str, str, str]  # ("join" | "sync", group_id, member_id)


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
