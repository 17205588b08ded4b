"""The ``groupcoord`` command. Each subcommand lives in its own module.

A subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``; it is imported only when its subcommand runs, so ``groupcoord up`` does
not pay for Spark or the operator.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

SUBCOMMANDS: dict[str, str] = {
    "up": "groupcoord.local_cluster",
    "status": "groupcoord.status",
    "gateway": "groupcoord.gateway.command",
    "shard": "groupcoord.coordinator.server.supervisor",
    "operator": "groupcoord_operator.command",
    "capacity": "groupcoord_spark.capacity.command",
}


def _help_of(module_name: str) -> str:
    try:
        return str(importlib.import_module(module_name).HELP)
    except Exception as exc:  # a broken optional subcommand must not break the others
        return f"(unavailable: {exc})"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="groupcoord", description="Kafka group coordinator service.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if a in SUBCOMMANDS), None)
    for name, module_name in SUBCOMMANDS.items():
        if name == chosen:
            module = importlib.import_module(module_name)
            p = sub.add_parser(name, help=module.HELP, description=module.HELP)
            module.add_arguments(p)
            p.set_defaults(_module=module)
        else:
            sub.add_parser(name, help=_help_of(module_name) if chosen is None else None, add_help=False)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args._module.main(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
