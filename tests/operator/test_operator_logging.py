"""The operator container's entry point (``python -m groupcoord_operator``) with
``GROUPCOORD_LOG_FORMAT=json``: its own lines and kopf's per-object ones are JSON, one a line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Runs the entry point with the operator itself (command.main) replaced by a few log lines:
# one of ours, and one of kopf's object loggers (extra: the object's reference and kopf's
# settings, which is no JSON and must be left out).
PROGRAM = """
import logging, sys
import kopf
from kopf._core.actions.loggers import ObjectLogger
from groupcoord_operator import __main__ as entry, command

def fake_main(args):
    logging.getLogger("groupcoord_operator.reconcile").info("reconciled %s", "gc")
    body = {"apiVersion": "groupcoord.io/v1alpha1", "kind": "GroupCoordinator",
            "metadata": {"name": "gc", "namespace": "kafka", "uid": "u1"}}
    ObjectLogger(body=kopf.Body(body), settings=kopf.OperatorSettings()).warning("Handler failed")
    return 0

command.main = fake_main
sys.exit(entry.run([]))
"""


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_operator_log_lines_follow_the_format(log_format: str) -> None:
    env = {**os.environ, "GROUPCOORD_LOG_FORMAT": log_format, "LOG_LEVEL": "INFO"}
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=False, env=env
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 2, lines
    if log_format == "text":
        assert not any(line.startswith("{") for line in lines)
        return
    ours, kopfs = (json.loads(line) for line in lines)
    assert (ours["logger"], ours["level"], ours["message"]) == ("groupcoord_operator.reconcile", "INFO", "reconciled gc")
    assert (kopfs["logger"], kopfs["level"], kopfs["message"]) == ("kopf.objects", "WARNING", "Handler failed")
    assert kopfs["k8s_ref"]["name"] == "gc" and kopfs["k8s_ref"]["namespace"] == "kafka"
    assert "settings" not in kopfs
