"""Share sessions as Kafka's ShareSessionCache keeps them: opened by epoch 0, moved on by one
at every request, partitions added and forgotten, ended by -1 or by the close of the connection
that opened it; Kafka's errors otherwise."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from groupcoord.gateway.groups.share_sessions import MAX_EPOCH, EndedSession, ShareSessionError, ShareSessions

A, B, C = (b"a" * 16, 0), (b"a" * 16, 1), (b"b" * 16, 0)


def refused(call, *args) -> ErrorCode:  # noqa: ANN001
    with pytest.raises(ShareSessionError) as raised:
        call(*args)
    return raised.value.code


def test_a_session_opens_moves_on_and_closes() -> None:
    sessions = ShareSessions()
    assert sessions.fetch("g", "m", 0, [A, B], []) == [A, B]
    assert sessions.fetch("g", "m", 1, [C], [A]) == [B, C]
    sessions.acknowledge("g", "m", 2)
    assert sessions.fetch("g", "m", 3, [], []) == [B, C]
    assert sessions.fetch("g", "m", -1, [], []) == [], "the final fetch fetches nothing"
    assert sessions.final("g", "m") == EndedSession("g", "m", [B, C]), "what the member holds there goes back"
    assert refused(sessions.fetch, "g", "m", 5, [], []) is ErrorCode.share_session_not_found
    assert len(sessions) == 0


def test_wrong_epochs_and_unknown_sessions_get_kafkas_errors() -> None:
    sessions = ShareSessions()
    assert refused(sessions.fetch, "g", "m", 1, [A], []) is ErrorCode.share_session_not_found
    assert refused(sessions.acknowledge, "g", "m", 0) is ErrorCode.invalid_share_session_epoch
    sessions.fetch("g", "m", 0, [A], [])
    assert refused(sessions.fetch, "g", "m", 7, [A], []) is ErrorCode.invalid_share_session_epoch
    assert sessions.fetch("g", "m", 1, [], []) == [A], "a refused request moved nothing"
    assert sessions.fetch("g", "m", 0, [B], []) == [B], "epoch 0 replaces the member's session"
    assert refused(sessions.fetch, "g", "other", 1, [A], []) is ErrorCode.share_session_not_found


def test_the_cache_is_bounded_and_epochs_wrap_past_the_maximum() -> None:
    sessions = ShareSessions(max_sessions=2)
    sessions.fetch("g", "a", 0, [A], [])
    sessions.fetch("g", "b", 0, [A], [])
    assert refused(sessions.fetch, "g", "c", 0, [A], []) is ErrorCode.share_session_limit_reached
    sessions.fetch("g", "a", 0, [B], [])  # a member's own new session is no new entry
    sessions._sessions[("g", "a")].epoch = MAX_EPOCH
    sessions.fetch("g", "a", MAX_EPOCH, [], [])
    assert sessions.fetch("g", "a", 1, [], []) == [B]


def test_a_session_ends_with_the_connection_that_opened_it() -> None:
    sessions = ShareSessions()
    first, second = object(), object()
    sessions.fetch("g", "a", 0, [A, B], [], first)
    sessions.fetch("g", "b", 0, [C], [], first)
    sessions.fetch("g", "c", 0, [A], [], second)
    sessions.fetch("g", "b", 0, [B], [], second)  # b's consumer reconnected: its new session is second's
    assert sessions.disconnected(first) == [EndedSession("g", "a", [A, B])]
    assert refused(sessions.fetch, "g", "a", 1, [], []) is ErrorCode.share_session_not_found
    assert sessions.fetch("g", "b", 1, [], [], first) == [B], "a later request on another connection moves nothing"
    assert sessions.disconnected(first) == []
    assert sessions.disconnected(second) == [EndedSession("g", "b", [B]), EndedSession("g", "c", [A])]
    assert len(sessions) == 0 and not sessions._by_connection
