"""``groupcoord up``: the whole cluster on one machine (the embedded default).

Starts a real Kafka-compatible broker (tansu, in-memory) unless ``--kafka`` names an existing
cluster, then the gateway in this process, prints the bootstrap address, and on Ctrl-C/SIGTERM
stops everything it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway.command import parse_address
from groupcoord.gateway.server import Gateway, new_event_loop

HELP = "start a local cluster: embedded broker (unless --kafka) and the gateway"
log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=9092, help="gateway bootstrap port (default 9092)")
    parser.add_argument("--host", default="127.0.0.1", help="address the gateway listens on")
    parser.add_argument(
        "--kafka",
        type=parse_address,
        default=None,
        help="use this Kafka cluster instead of the embedded broker",
    )


async def _run(args: argparse.Namespace, upstream: tuple[str, int]) -> None:
    gateway = Gateway(upstream, listen_host=args.host, port=args.port, advertised_host=args.host)
    await gateway.start()
    host, port = gateway.bootstrap_address
    print(f"groupcoord is up: bootstrap {host}:{port} (upstream {upstream[0]}:{upstream[1]})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await gateway.stop()


def main(args: argparse.Namespace) -> int:
    broker: EmbeddedBroker | None = None
    try:
        if args.kafka is None:
            broker = EmbeddedBroker().start()
            log.info("embedded broker on %s", broker.bootstrap)
            upstream = (broker.host, broker.port)
        else:
            upstream = args.kafka
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(_run(args, upstream))
    finally:
        if broker is not None:
            broker.stop()
    print("groupcoord stopped", flush=True)
    return 0
