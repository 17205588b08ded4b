"""A shard process hosting register shards: ``groupcoord shard`` with the runtime's test shard.

Test-only entry point, so the product names no test module: it takes ``groupcoord shard``'s
arguments and runs the same supervisor and workers, which host
:data:`register_shard.REGISTER_SHARDS` instead of the group coordinator. Run it as a script
(``python register_shard_process.py --kafka ... --threads 2``): its directory is then on
``sys.path``, which the spawned workers inherit, so they find ``register_shard`` too.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from register_shard import REGISTER_SHARDS

from groupcoord.coordinator.server import supervisor

PATH = Path(__file__).resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PATH.name, description=supervisor.HELP)
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    supervisor.add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return supervisor.main(args, REGISTER_SHARDS)


if __name__ == "__main__":
    sys.exit(main())
