"""Topic metadata from the real broker reaches every active partition, once per change."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.coordinator.runtime.topic_metadata import TopicMetadataRefresher, fetch_topics
from groupcoord.embedded_broker import EmbeddedBroker

pytestmark = pytest.mark.broker


async def test_images_follow_topic_changes_and_new_leaders(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"tm-{uuid.uuid4().hex[:6]}"
    for fut in admin.create_topics([NewTopic(name, 2, 1)]).values():
        fut.result(10)
    delivered: list[tuple[int, dict]] = []
    active = [(0, 1), (3, 1)]
    refresher = TopicMetadataRefresher(
        broker.bootstrap,
        build_image=lambda ds: {d.name: (d.topic_id, d.partitions) for d in ds},
        active=lambda: list(active),
        deliver=lambda p, image: delivered.append((p, image)),
    )
    # given a topic, then both active partitions get an image naming it, once
    assert await refresher.refresh()
    refresher.push()
    refresher.push()
    assert [p for p, _ in delivered] == [0, 3]
    topic_id, partitions = delivered[0][1][name]
    assert partitions == 2 and topic_id.int != 0
    # when nothing changes, then nothing is sent again
    assert not await refresher.refresh()
    refresher.push()
    assert len(delivered) == 2
    # when the topic is recreated (the embedded broker has no CreatePartitions) with more
    # partitions, then every active partition gets the new id and count
    for fut in admin.delete_topics([name]).values():
        fut.result(10)
    for fut in admin.create_topics([NewTopic(name, 4, 1)]).values():
        fut.result(10)
    assert await refresher.refresh()
    refresher.push()
    assert [(p, img[name][1]) for p, img in delivered[2:]] == [(0, 4), (3, 4)]
    assert delivered[2][1][name][0] != topic_id
    # when a partition gets a new leader epoch, then it gets the current image again
    active[1] = (3, 2)
    refresher.push()
    assert delivered[-1][0] == 3 and len(delivered) == 5


async def test_fetch_reports_ids_and_partition_counts(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"tm-{uuid.uuid4().hex[:6]}"
    for fut in admin.create_topics([NewTopic(name, 3, 1)]).values():
        fut.result(10)
    (topic,) = [d for d in await fetch_topics(broker.bootstrap) if d.name == name]
    assert topic.partitions == 3 and len(topic.partition_racks) == 3


async def test_fetch_goes_on_to_the_next_bootstrap_address_when_the_first_is_down(broker: EmbeddedBroker) -> None:
    from groupcoord.embedded_broker import free_port  # noqa: PLC0415

    dead = f"127.0.0.1:{free_port('127.0.0.1')}"
    name = f"tm-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(name, 2, 1)]).values():
        fut.result(10)
    assert name in {d.name for d in await fetch_topics(f"{dead},{broker.bootstrap}")}
    with pytest.raises(ConnectionError):
        await fetch_topics(dead, timeout_s=2)


async def test_a_partition_that_loads_again_or_refused_the_image_gets_it_again(broker: EmbeddedBroker) -> None:
    """``active`` names each partition with the id of its load: a reload at the same epoch
    (after a failed write) is a fresh shard; a delivery the partition refused (it was
    reloading) is sent again on the next tick."""
    import asyncio  # noqa: PLC0415

    loop = asyncio.get_running_loop()
    delivered: list[int] = []
    refuse = True

    def deliver(partition: int, image: object) -> asyncio.Future[None]:
        delivered.append(partition)
        future: asyncio.Future[None] = loop.create_future()
        if refuse:
            future.set_exception(RuntimeError("partition 0 loading"))
        else:
            future.set_result(None)
        return future

    active = [(0, 7)]
    refresher = TopicMetadataRefresher(
        broker.bootstrap, build_image=lambda ds: len(ds), active=lambda: list(active), deliver=deliver
    )
    await refresher.refresh()
    refresher.push()
    await asyncio.sleep(0)  # the refusal's callback
    assert not refresher._loads_waiting(), "a refusal is sent again without another fetch"
    refuse = False
    refresher.push()
    refresher.push()
    assert delivered == [0, 0], "refused once, then delivered once"
    active[0] = (0, 8)  # loaded again (same partition, same epoch or not)
    refresher.push()
    assert delivered == [0, 0, 0]


async def test_a_request_naming_a_topic_the_image_lacks_waits_for_one_fetch_that_has_it(
    broker: EmbeddedBroker,
) -> None:
    """A member subscribing to a topic created a moment ago: Kafka's coordinator reads the
    broker's image, which has the topic at once. Here the request waits for one early fetch,
    whose image reaches the partitions before the wait ends; concurrent requests share that
    fetch, and a topic that does not exist is looked for early once per ``early_gap_s``."""
    import asyncio  # noqa: PLC0415

    delivered: list[frozenset[str]] = []
    refresher = TopicMetadataRefresher(
        broker.bootstrap,
        build_image=lambda ds: frozenset(d.name for d in ds),
        active=lambda: [(0, 1)],
        deliver=lambda p, image: delivered.append(image),
        early_gap_s=30,
    )
    await refresher.refresh()
    refresher.push()
    known = next(iter(delivered[0]))
    # given topics the image has, then nothing waits
    assert refresher.lacking([known]) is None
    # when a topic is created after the last fetch, then requests naming it wait for one fetch
    # (shared), and the partition has the new image when they go on
    name = f"tm-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(name, 2, 1)]).values():
        fut.result(10)
    first, second = refresher.lacking([name, known]), refresher.lacking([name])
    assert first is not None and second is not None
    await asyncio.gather(first, second)
    assert len(delivered) == 2 and name in delivered[-1]
    assert refresher.lacking([name]) is None
    # when a request names a topic that does not exist, then it waits for one fetch, and the
    # next request naming it does not wait within the gap (the poll finds it when it comes)
    missing = f"tm-missing-{uuid.uuid4().hex[:6]}"
    looked = refresher.lacking([missing])
    assert looked is not None
    await looked
    assert refresher.lacking([missing, name]) is None
    assert len(delivered) == 2


async def test_a_commit_naming_a_topic_by_an_id_the_image_lacks_waits_for_one_fetch_that_has_it(
    broker: EmbeddedBroker,
) -> None:
    """OffsetCommit v10 and TxnOffsetCommit v6 name topics by id, an id the client read from the
    upstream's metadata: a topic created a moment ago is found by one early fetch, as by name;
    an id no topic has is looked for early once per ``early_gap_s``."""
    delivered: list[frozenset[bytes]] = []
    refresher = TopicMetadataRefresher(
        broker.bootstrap,
        build_image=lambda ds: frozenset(d.topic_id.bytes for d in ds),
        active=lambda: [(0, 1)],
        deliver=lambda p, image: delivered.append(image),
        early_gap_s=30,
    )
    await refresher.refresh()
    refresher.push()
    name = f"tm-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
        fut.result(10)
    topic_id = next(d.topic_id.bytes for d in await fetch_topics(broker.bootstrap) if d.name == name)
    assert topic_id not in delivered[-1]
    waiting = refresher.lacking((), [topic_id])
    assert waiting is not None
    await waiting
    assert topic_id in delivered[-1] and refresher.lacking((), [topic_id]) is None
    nobody = uuid.uuid4().bytes
    looked = refresher.lacking((), [nobody])
    assert looked is not None
    await looked
    assert refresher.lacking((), [nobody]) is None


async def test_a_partition_that_starts_leading_gets_an_image_fetched_after_it_loaded(broker: EmbeddedBroker) -> None:
    """A takeover: the state the new leader loaded may name a topic created after this worker's
    last poll (a share group's dead letters name their source topic by the image, and CI wrote
    a predecessor's copies twice when the new leader named it by id). The loaded partition's
    first image is fetched after its load, well before the next poll."""
    import asyncio  # noqa: PLC0415

    delivered: list[tuple[int, frozenset[str]]] = []
    active: list[tuple[int, int]] = [(0, 1)]
    refresher = TopicMetadataRefresher(
        broker.bootstrap,
        build_image=lambda ds: frozenset(d.name for d in ds),
        active=lambda: list(active),
        deliver=lambda p, image: delivered.append((p, image)),
        interval_s=3600,
        tick_s=0.05,
    )
    running = asyncio.create_task(refresher.run())
    try:
        while not delivered:
            await asyncio.sleep(0.05)
        name = f"tm-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
            fut.result(10)
        active.append((5, 1))  # partition 5 loaded here, after the last poll
        for _ in range(100):
            if any(p == 5 for p, _ in delivered):
                break
            await asyncio.sleep(0.05)
        (image,) = [image for p, image in delivered if p == 5]
        assert name in image, "its first image was fetched after the load"
        assert name in delivered[-1][1] and {p for p, _ in delivered[1:]} == {0, 5}, "the others get it too"
    finally:
        running.cancel()
