"""The ``groupcoord`` command. Each subcommand lives in its own module.

A subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``; it is imported only when its subcommand runs, so ``groupcoord up`` does
not pay for Spark or the operator.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import logging
import os
import sys
from types import ModuleType
from typing import Any

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


LOG_FORMATS = ("text", "json")
LOG_FORMAT_ENV = "GROUPCOORD_LOG_FORMAT"


def add_log_level(parser: argparse.ArgumentParser) -> None:
    """The ``--log-level`` and ``--log-format`` flags of every entry point (this command, and the
    test shard process's, which runs ``groupcoord shard``'s supervisor with another shard).
    ``--log-format`` defaults to ``$GROUPCOORD_LOG_FORMAT`` so a pod sets it once for the
    process and everything it spawns."""
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=os.environ.get(LOG_FORMAT_ENV) or "text",
        help=f"text, or json: one JSON object per line (env {LOG_FORMAT_ENV}; default text)",
    )


# Attributes every LogRecord has: not ``extra=`` fields.
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO-8601 UTC, ms), level, logger, message, ``worker`` in
    a worker process, ``exc_info`` / ``stack_info`` as text, and every ``extra=`` field that is
    JSON-serialisable (others are left out). ``json.dumps`` escapes newlines (and, with ASCII
    output, every other line separator), so a traceback never spans lines."""

    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        time = dt.datetime.fromtimestamp(record.created, dt.UTC)
        entry: dict[str, Any] = {
            "time": time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self.worker is not None:
            entry["worker"] = self.worker
        if record.exc_info:
            entry["exc_info"] = record.exc_text or self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        for key, value in record.__dict__.items():
            if key in _RECORD_ATTRS or key in entry:
                continue
            try:
                json.dumps(value)
            except (TypeError, ValueError):  # e.g. kopf's OperatorSettings: not a log field
                continue
            entry[key] = value
        return json.dumps(entry)


def configure_logging(level: str, log_format: str = "text", worker: int | None = None) -> None:
    """The one log format of every process: ``text`` lines, or ``json`` objects (one a line);
    ``worker`` names a worker process (``w0`` before the logger's name, or ``"worker": 0``)."""
    if log_format not in LOG_FORMATS:
        raise SystemExit(f"unknown log format {log_format!r} (--log-format / {LOG_FORMAT_ENV}): text or json")
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter(worker))
    else:
        prefix = "" if worker is None else f"w{worker} "
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {prefix}%(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])


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
