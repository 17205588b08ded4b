"""Share sessions (KIP-932): which share-partitions a member fetches, and the epoch that orders
its ShareFetch and ShareAcknowledge requests — Kafka's ``ShareSessionCache``, sans-IO.

A session belongs to the gateway process the member talks to, as Kafka's belongs to a broker:
keyed by (group id, member id), opened by a ShareFetch with epoch 0 (which replaces any earlier
session of the member), moved on by one at every request, closed by epoch -1 (the final
acknowledgements). Kafka's errors: an epoch other than the session's is
INVALID_SHARE_SESSION_EPOCH, a request for a session that does not exist
SHARE_SESSION_NOT_FOUND, a new session beyond the cache's size SHARE_SESSION_LIMIT_REACHED, and
ShareAcknowledge cannot open one (INVALID_SHARE_SESSION_EPOCH).

As in Kafka 4.4, a session also belongs to the connection that opened it: when that connection
closes, the session ends as if by its final epoch (:meth:`ShareSessions.disconnected`), and the
member's acquired records of it are given back at once rather than after their locks. A member
whose session another connection has replaced keeps the new one when the old connection goes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
DEFAULT_MAX_SESSIONS = 2_000  # Kafka's share.max.share.sessions

SharePartitionId = tuple[bytes, int]  # (topic id, partition)


@dataclass(slots=True)
class ShareSession:
    epoch: int  # what the member's next request must carry
    partitions: dict[SharePartitionId, None] = field(default_factory=dict)  # in request order
    connection: Hashable = None  # the client connection that opened it


@dataclass(frozen=True, slots=True)
class EndedSession:
    """A session that ended: what its member may still hold is given back in ``partitions``."""

    group_id: str
    member_id: str
    partitions: list[SharePartitionId]


class ShareSessionError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def _next(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class ShareSessions:
    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[Hashable, set[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[SharePartitionId],
        forgotten: Iterable[SharePartitionId],
        connection: Hashable = None,
    ) -> list[SharePartitionId]:
        """A ShareFetch on ``connection``: the share-partitions to fetch now (none for the final
        one: :meth:`final` then names the session's), or :class:`ShareSessionError`."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if key not in self._sessions and len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(ErrorCode.share_session_limit_reached)
            self._forget(key)
            session = self._sessions[key] = ShareSession(1, dict.fromkeys(added), connection)
            self._by_connection.setdefault(connection, set()).add(key)
            return list(session.partitions)
        session = self._current(key, epoch)
        if epoch == FINAL_EPOCH:
            return []
        for p in added:
            session.partitions[p] = None
        for p in forgotten:
            session.partitions.pop(p, None)
        session.epoch = _next(epoch)
        return list(session.partitions)

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> None:
        """A ShareAcknowledge: checked against the session (ended by the final epoch: :meth:`final`)."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
        session = self._current((group_id, member_id), epoch)
        if epoch != FINAL_EPOCH:
            session.epoch = _next(epoch)

    def final(self, group_id: str, member_id: str) -> EndedSession:
        """End the member's session after its final request was checked (its acknowledgements
        are applied with the session's share-partitions given back)."""
        session = self._forget((group_id, member_id))
        return EndedSession(group_id, member_id, list(session.partitions) if session is not None else [])

    def disconnected(self, connection: Hashable) -> list[EndedSession]:
        """The sessions ``connection`` opened, ended because it closed."""
        ended = []
        for key in sorted(self._by_connection.get(connection, ())):
            session = self._forget(key)
            if session is not None:
                ended.append(EndedSession(*key, list(session.partitions)))
        return ended

    def _forget(self, key: tuple[str, str]) -> ShareSession | None:
        session = self._sessions.pop(key, None)
        if session is not None:
            keys = self._by_connection.get(session.connection)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_connection[session.connection]
        return session

    def _current(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found)
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
        return session
