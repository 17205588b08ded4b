"""A shard process hosting register shards: ``groupcoord shard`` with the runtime's test shard.

Test-only entry point, so the product names no test module: it takes ``groupcoord shard``'s
arguments and runs the same supervisor and workers, which host
:data:`register_shard.REGISTER_SHARDS` instead of the group coordinator. Run it as a script
(``python register_shard_process.py --kafka ... --threads 2``): its directory is then on
``sys.path``, which the spawned workers inherit, so they find ``register_shard`` too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from register_shard import REGISTER_SHARDS

from groupcoord.common.process_logging import add_log_level, configure_logging
from groupcoord.coordinator.server import supervisor

PATH = Path(__file__).resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PATH.name, description=supervisor.HELP)
    add_log_level(parser)
    supervisor.add_arguments(parser)
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    return supervisor.main(args, REGISTER_SHARDS)


if __name__ == "__main__":
    sys.exit(main())
