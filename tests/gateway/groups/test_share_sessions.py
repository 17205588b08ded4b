"""Share sessions as Kafka's ShareSessionCache keeps them: opened by epoch 0, moved on by one
at every request, partitions added and forgotten, closed by -1; Kafka's errors otherwise."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from groupcoord.gateway.groups.share_sessions import MAX_EPOCH, ShareSessionError, ShareSessions

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
