"""``python -m groupcoord_operator`` — the operator container's entry point."""

from __future__ import annotations

import argparse
import os

from groupcoord.common.process_logging import add_log_level, configure_logging
from groupcoord_operator import command


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="groupcoord_operator", description=command.HELP)
    add_log_level(parser)  # --log-format defaults to $GROUPCOORD_LOG_FORMAT
    parser.set_defaults(log_level=os.environ.get("LOG_LEVEL", "INFO"))
    command.add_arguments(parser)
    args = parser.parse_args(argv)
    # kopf.run() leaves logging to us: its own lines (and its per-object ones, whose k8s_ref
    # becomes a field) go through the same handler, so json makes every line JSON.
    configure_logging(str(args.log_level), str(args.log_format))
    return command.main(args)


if __name__ == "__main__":
    raise SystemExit(run())
