"""The gateway's share of a streams heartbeat: internal topics asked for once, not at every
heartbeat of every member while the shards' topics image catches up."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kio.schema.create_topics.v5.response import CreatableTopicResult, CreateTopicsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i32Timedelta

from groupcoord.gateway.groups import streams_apis
from groupcoord.gateway.groups.serving import CallContext
from groupcoord.rpc.v1 import streams_group_pb2 as st


class Apis:
    """What create_internal_topics reads of the gateway's GroupServing: no authorizer."""

    authorization = None


class Upstream:
    """The member's upstream connection: answers CreateTopics, refusing ``refused``, counting."""

    def __init__(self, refused: frozenset[str] = frozenset(), reachable: bool = True) -> None:
        self.asked: list[list[str]] = []
        self.refused = refused
        self.reachable = reachable

    async def ask(self, request: Any) -> Any:
        if not self.reachable:
            raise ConnectionError("upstream down")
        names = [str(t.name) for t in request.topics]
        self.asked.append(names)
        return CreateTopicsResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
            topics=tuple(
                CreatableTopicResult(
                    name=n,
                    error_code=ErrorCode.topic_authorization_failed if n in self.refused else ErrorCode.none,
                    error_message=None,
                    topic_config_error_code=i16(0),
                    num_partitions=i32(1),
                    replication_factor=i16(1),
                    configs=None,
                )
                for n in names
            ),
        )


def _ctx(upstream: Upstream, principal: str = "User:alice") -> CallContext:
    return CallContext(None, 0, ("localhost", 9092), "127.0.0.1", principal, ask=upstream.ask)


TOPICS = [st.StreamsTopicToCreate(name="app-store-changelog", partitions=2), st.StreamsTopicToCreate(name="app-rep")]


def test_three_members_heartbeating_while_the_topics_are_missing_ask_the_upstream_once() -> None:
    apis, upstream = Apis(), Upstream()
    for _ in range(3):
        assert asyncio.run(streams_apis.create_internal_topics(apis, _ctx(upstream), TOPICS)) == []
    assert upstream.asked == [["app-store-changelog", "app-rep"]]


def test_a_refusal_is_remembered_with_the_answer_and_another_principal_asks_for_itself() -> None:
    apis, upstream = Apis(), Upstream(refused=frozenset({"app-rep"}))
    for _ in range(2):
        assert asyncio.run(streams_apis.create_internal_topics(apis, _ctx(upstream), TOPICS)) == ["app-rep"]
    assert len(upstream.asked) == 1
    asyncio.run(streams_apis.create_internal_topics(apis, _ctx(upstream, "User:bob"), TOPICS))
    assert len(upstream.asked) == 2


def test_an_upstream_not_reached_is_asked_again_at_the_next_heartbeat() -> None:
    apis, upstream = Apis(), Upstream(reachable=False)
    assert asyncio.run(streams_apis.create_internal_topics(apis, _ctx(upstream), TOPICS)) == []
    upstream.reachable = True
    asyncio.run(streams_apis.create_internal_topics(apis, _ctx(upstream), TOPICS))
    assert len(upstream.asked) == 1


def test_what_was_asked_is_forgotten_after_a_while() -> None:
    now = [0.0]
    asked = streams_apis.RecentlyAsked(clock=lambda: now[0])
    asked.record("User:alice", "t", refused=True)
    assert asked.answered("User:alice", "t") is True
    assert asked.answered("User:bob", "t") is None
    now[0] = streams_apis.ASKED_FOR_S + 1
    assert asked.answered("User:alice", "t") is None
