"""``python -m groupcoord_operator`` — the operator container's entry point."""

from __future__ import annotations

import argparse
import logging
import os

from groupcoord_operator import command


def run() -> int:
    parser = argparse.ArgumentParser(prog="groupcoord_operator", description=command.HELP)
    command.add_arguments(parser)
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return command.main(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(run())
