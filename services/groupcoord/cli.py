"""The ``groupcoord`` command. Each subcommand lives in its own module.

A subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``; it is imported only when its subcommand runs, so ``groupcoord up`` does
not pay for Spark or the operator.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from types import ModuleType

from groupcoord.common.process_logging import LOG_FORMAT_ENV, add_log_level, configure_logging

SUBCOMMANDS: dict[str, str] = {
    "up": "groupcoord.local_cluster",
    "status": "groupcoord.status",
    "groups": "groupcoord.admin.command",
    "share-groups": "groupcoord.admin.share_command",
    "gateway": "groupcoord.gateway.command",
    "shard": "groupcoord.coordinator.server.supervisor",
    "operator": "groupcoord_operator.command",
    "capacity": "groupcoord_spark.capacity.command",
}


# Subcommands whose dependencies are an optional extra: subcommand -> extra.
EXTRAS: dict[str, str] = {"operator": "operator", "capacity": "spark"}


def _missing_extra(name: str, exc: ModuleNotFoundError) -> str:
    extra = EXTRAS.get(name)
    install = f"pip install 'groupcoord[{extra}]'" if extra else "reinstall groupcoord"
    module = (exc.name or "a module that is missing").split(".")[0]
    return f"groupcoord {name} needs {module}: {install}"


def _import(name: str) -> ModuleType:
    """The subcommand's module; a missing optional dependency ends the command with one line
    naming the extra to install (never a traceback)."""
    try:
        return importlib.import_module(SUBCOMMANDS[name])
    except ModuleNotFoundError as exc:
        raise SystemExit(_missing_extra(name, exc)) from None


def _help_of(name: str) -> str:
    try:
        return str(importlib.import_module(SUBCOMMANDS[name]).HELP)
    except ModuleNotFoundError as exc:
        return f"(unavailable: {_missing_extra(name, exc).split(': ', 1)[1]})"
    except Exception as exc:  # a broken optional subcommand must not break the others
        return f"(unavailable: {exc})"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="groupcoord", description="Kafka group coordinator service.")
    add_log_level(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if a in SUBCOMMANDS), None)
    for name in SUBCOMMANDS:
        if name == chosen:
            module = _import(name)
            p = sub.add_parser(name, help=module.HELP, description=module.HELP)
            module.add_arguments(p)
            p.set_defaults(_module=module)
        else:
            sub.add_parser(name, help=_help_of(name) if chosen is None else None, add_help=False)
    args = parser.parse_args(argv)
    configure_logging(str(args.log_level), str(args.log_format))
    os.environ[LOG_FORMAT_ENV] = str(args.log_format)  # and the processes it starts (`up`'s shards)
    try:
        return int(args._module.main(args) or 0)
    except ModuleNotFoundError as exc:  # an optional dependency imported when the command runs
        raise SystemExit(_missing_extra(chosen or "", exc)) from None


if __name__ == "__main__":
    raise SystemExit(main())
