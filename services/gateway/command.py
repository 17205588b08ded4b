"""``groupcoord gateway``: run the Kafka-protocol gateway in front of an upstream cluster."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from groupcoord.gateway.server import Gateway, new_event_loop

HELP = "run the Kafka-protocol gateway in front of an upstream Kafka cluster"


def parse_address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kafka", type=parse_address, required=True, help="upstream bootstrap HOST:PORT")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=9092, help="bootstrap listener port (default 9092)")
    parser.add_argument(
        "--advertised-host", default=None, help="host name clients should use (default --host)"
    )


async def serve(gateway: Gateway) -> None:
    await gateway.start()
    host, port = gateway.bootstrap_address
    print(f"gateway ready: bootstrap {host}:{port}", flush=True)
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
    advertised = args.advertised_host or (args.host if args.host != "0.0.0.0" else "127.0.0.1")
    gateway = Gateway(args.kafka, listen_host=args.host, port=args.port, advertised_host=advertised)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve(gateway))
    return 0
