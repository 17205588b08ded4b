"""The gateway's topic catalog against a real broker: which topics and partitions exist, asked
of the upstream only when the cache cannot answer, never creating a topic."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.groups.topic_catalog import ABSENT, TopicCatalog
from groupcoord.gateway.proxy.upstream import ask_upstream

pytestmark = pytest.mark.broker


class CountingUpstream:
    """The real broker, counting the Metadata requests the catalog sends it."""

    def __init__(self, broker: EmbeddedBroker) -> None:
        self.address = (broker.host, broker.port)
        self.asked: list[tuple[str, ...]] = []

    async def __call__(self, request: Any) -> Any:
        self.asked.append(tuple(t.name for t in request.topics))
        return await ask_upstream(self.address, request)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def create(broker: EmbeddedBroker, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": f"{broker.host}:{broker.port}"})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(15)


async def test_unknown_topics_and_partition_indexes_beyond_the_count(broker: EmbeddedBroker) -> None:
    topic, missing = f"cat-{uuid.uuid4().hex[:6]}", f"cat-missing-{uuid.uuid4().hex[:6]}"
    create(broker, topic, 2)
    catalog = TopicCatalog(CountingUpstream(broker))
    unknown = await catalog.unknown_partitions([(topic, 0), (topic, 1), (topic, 2), (topic, -1), (missing, 0)])
    assert unknown == {(topic, 2), (topic, -1), (missing, 0)}
    assert await catalog.unknown_topics([topic, missing]) == {missing}
    # and asking never created the missing topic
    assert await TopicCatalog(CountingUpstream(broker)).partition_counts({missing: 0}) == {missing: ABSENT}


async def test_the_cache_answers_until_it_may_be_stale(broker: EmbeddedBroker) -> None:
    topic, later = f"cat-{uuid.uuid4().hex[:6]}", f"cat-later-{uuid.uuid4().hex[:6]}"
    create(broker, topic, 2)
    upstream, clock = CountingUpstream(broker), Clock()
    catalog = TopicCatalog(upstream, ttl_s=30, absent_ttl_s=0.5, clock=clock)
    assert await catalog.unknown_partitions([(topic, 1), (later, 0)]) == {(later, 0)}
    assert len(upstream.asked) == 1
    # a known topic is answered from the cache; an absent one too, for a short while
    clock.now += 0.1
    assert await catalog.unknown_partitions([(topic, 0), (later, 0)]) == {(later, 0)}
    assert len(upstream.asked) == 1
    # a topic created since is committable as soon as the absent entry is stale
    create(broker, later, 1)
    clock.now += 1
    assert await catalog.unknown_partitions([(topic, 0), (later, 0)]) == set()
    assert upstream.asked[-1] == (later,)
    # a partition index beyond the known count is asked again at once (partitions may have
    # been added since; tansu cannot add partitions, so here the answer stays "unknown")
    asked = len(upstream.asked)
    assert await catalog.unknown_partitions([(topic, 2)]) == {(topic, 2)}
    assert len(upstream.asked) == asked + 1 and upstream.asked[-1] == (topic,)
    # and a known topic is asked again once its entry is older than the ttl
    clock.now += 31
    await catalog.unknown_partitions([(topic, 0)])
    assert upstream.asked[-1] == (topic,)


async def test_concurrent_lookups_share_one_upstream_request(broker: EmbeddedBroker) -> None:
    topic = f"cat-{uuid.uuid4().hex[:6]}"
    create(broker, topic, 1)
    upstream = CountingUpstream(broker)
    catalog = TopicCatalog(upstream)
    results = await asyncio.gather(*(catalog.unknown_partitions([(topic, 0), (topic, 5)]) for _ in range(20)))
    assert all(r == {(topic, 5)} for r in results)
    assert len(upstream.asked) <= 2  # the first asks; a later one may ask again for index 5


async def test_an_unreachable_upstream_refuses_nothing() -> None:
    async def down(_request: Any) -> Any:
        raise ConnectionError("upstream down")

    catalog = TopicCatalog(down)
    assert await catalog.unknown_partitions([("orders", 0)]) == set()
    assert await catalog.unknown_topics(["orders"]) == set()


async def test_the_catalog_remembers_at_most_max_topics_least_recently_used_first(broker: EmbeddedBroker) -> None:
    """Names any client sends must not grow the gateway's memory forever."""
    upstream = CountingUpstream(broker)
    catalog = TopicCatalog(upstream, clock=Clock(), max_topics=3)
    kept = f"cat-kept-{uuid.uuid4().hex[:6]}"
    assert await catalog.unknown_topics([kept]) == {kept}
    for i in range(10):
        assert await catalog.unknown_topics([f"cat-junk-{i}-{uuid.uuid4().hex[:6]}"])
        await catalog.unknown_topics([kept])  # used all along: stays remembered
    assert len(catalog._known) == 3
    asked = len(upstream.asked)
    assert await catalog.unknown_topics([kept]) == {kept}
    assert len(upstream.asked) == asked  # answered from the cache
