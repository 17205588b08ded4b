"""A shard worker that cannot reach the state topic's Kafka cluster is not ready (issue 23).

A shard cut off from Kafka but not from the gateway and the operator is a zombie leader of
the upstream side: alive, answering health checks, and unable to write any partition it leads.
Its readiness must say so (the operator then moves its partitions to a shard that can write
them), and come back at the first answer from Kafka. The watch is driven here by a probe the
test controls; the real probe is checked against the real broker and a port nobody serves.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from groupcoord.coordinator.runtime.statelog import UpstreamProbe
from groupcoord.coordinator.server.health import READINESS_SERVICE, SERVING, ShardHealth
from groupcoord.coordinator.server.worker import _watch_upstream
from groupcoord.embedded_broker import EmbeddedBroker


class Upstream:
    """A probe whose answer the test decides: answering, refusing, or hanging (a cut network)."""

    def __init__(self) -> None:
        self.mode = "answer"
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.mode == "refuse":
            raise ConnectionError("refused")
        if self.mode == "hang":
            await asyncio.sleep(3600)


async def ready_health() -> ShardHealth:
    health = ShardHealth(worker=0, workers=1, peer_host="127.0.0.1", base_port=0, needs_leadership_source=False)
    await health.mark_started()
    return health


async def readiness(health: ShardHealth) -> bool:
    return health.worker_ready() and health.servicer._server_status[READINESS_SERVICE] == SERVING


async def until(what: str, check, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout_s):
        while not await check():
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("outage", ["hang", "refuse"])
async def test_readiness_drops_after_the_grace_without_an_answer_and_returns_at_the_first(outage: str) -> None:
    health = await ready_health()
    upstream = Upstream()
    watch = asyncio.create_task(_watch_upstream(upstream, health, every_s=0.02, timeout_s=0.05, grace_s=0.3))
    try:
        await asyncio.sleep(0.1)
        assert await readiness(health)
        loop = asyncio.get_running_loop()
        cut_at = loop.time()
        upstream.mode = outage

        async def not_ready() -> bool:
            return not await readiness(health)

        await until("not ready while Kafka does not answer", not_ready)
        # a blip shorter than the grace is not an outage (the last answer may precede the cut
        # by one probe period)
        assert loop.time() - cut_at >= 0.3 - 0.05
        calls = upstream.calls
        await asyncio.sleep(0.2)
        assert upstream.calls > calls and not await readiness(health)  # it keeps probing
        upstream.mode = "answer"
        await until("ready at the first answer", lambda: readiness(health), timeout_s=1.0)
    finally:
        watch.cancel()
        await health.close()


async def test_one_probe_outlived_by_a_busy_event_loop_keeps_the_worker_ready() -> None:
    """The probe shares the worker's loop: a loop blocked past the grace (a huge request being
    handled) times the probe in flight out although Kafka would answer. One failed probe
    followed by an answered one is not an outage."""
    health = await ready_health()
    published: list[bool] = []
    set_reachable = health.set_upstream_reachable

    async def record(reachable: bool) -> None:
        published.append(reachable)
        await set_reachable(reachable)

    health.set_upstream_reachable = record  # type: ignore[method-assign]
    upstream = Upstream()
    watch = asyncio.create_task(_watch_upstream(upstream, health, every_s=0.02, timeout_s=0.05, grace_s=0.3))
    try:
        await asyncio.sleep(0.1)
        upstream.mode = "hang"
        calls = upstream.calls
        while upstream.calls == calls:  # a probe is in flight
            await asyncio.sleep(0.001)
        upstream.mode = "answer"
        time.sleep(0.5)  # the loop is blocked past the grace: the probe in flight times out
        await asyncio.sleep(0.3)
        assert published == [] and await readiness(health)  # never went unready, not even briefly
    finally:
        watch.cancel()
        await health.close()


async def test_a_short_silence_keeps_the_worker_ready() -> None:
    health = await ready_health()
    upstream = Upstream()
    watch = asyncio.create_task(_watch_upstream(upstream, health, every_s=0.02, timeout_s=0.05, grace_s=1.0))
    try:
        upstream.mode = "hang"
        await asyncio.sleep(0.4)
        upstream.mode = "answer"
        await asyncio.sleep(0.2)
        assert await readiness(health)
    finally:
        watch.cancel()
        await health.close()


@pytest.mark.broker
async def test_the_probe_answers_from_the_real_broker_and_fails_where_nothing_listens(
    broker: EmbeddedBroker,
) -> None:
    probe = UpstreamProbe(broker.bootstrap, timeout_s=5.0)
    try:
        await probe()  # bootstrap
        await probe()  # a Metadata request on its own connection
    finally:
        await probe.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        nobody = UpstreamProbe(f"127.0.0.1:{port}", timeout_s=1.0)
        try:
            with pytest.raises(Exception):  # noqa: B017 - whatever aiokafka raises for "no broker"
                await asyncio.wait_for(nobody(), 5.0)
        finally:
            await nobody.close()
