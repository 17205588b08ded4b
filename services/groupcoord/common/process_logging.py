"""The one log format and log flags of every groupcoord process.

It lives in :mod:`groupcoord.common` rather than in the CLI because every process configures
its logging itself (a worker process, a gateway process spawned by another, the CLI), and the
coordinator and gateway must not import the command that starts them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
from typing import Any

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
