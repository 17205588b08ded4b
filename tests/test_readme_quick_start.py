"""The README's quick start, run as a new user runs it: its commands as the README writes them,
through the installed ``groupcoord`` command, on the embedded broker.

The venv and the install are the test environment's own (``scripts/test`` installs the package
editable, as the quick start does, with the ``local`` extra among the ``test`` ones); the only
other change is the port: the README's default, 9092, becomes a free one, so the test can run
beside others. A README whose quick start no longer starts a cluster, reports it, lists its
groups and stops on Ctrl-C fails here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groupcoord.embedded_broker import free_port
from tests.test_docs_facts import commands

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
GROUPCOORD = Path(sys.executable).with_name("groupcoord")  # the console script the install made
README_PORT = "9092"
UP_TIMEOUT_S = 120


def quick_start_commands() -> list[list[str]]:
    """Every ``groupcoord ...`` command the README's Quick start section writes out in full, in
    order, as the docs test reads commands (a placeholder such as ``--kafka HOST:PORT`` names a
    cluster of the reader's: that command is not run, only parsed by the docs test)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return [words for words, full in commands(section) if full and words]


def as_run_here(words: list[str], port: int) -> list[str]:
    """A README command with this test's port in place of the README's default."""
    words = [w.replace(f"127.0.0.1:{README_PORT}", f"127.0.0.1:{port}") for w in words]
    if words[0] in ("up", "status") and "--port" not in words:
        words = [*words, "--port", str(port)]
    return [str(GROUPCOORD), *words]


def test_the_readme_quick_start_starts_reports_lists_and_stops() -> None:
    quick_start = quick_start_commands()
    subcommands = [c[0] for c in quick_start]
    assert subcommands[:1] == ["up"] and "status" in subcommands and "groups" in subcommands, quick_start
    assert GROUPCOORD.exists(), f"no installed groupcoord command at {GROUPCOORD}"
    port = free_port()
    up = subprocess.Popen(
        as_run_here(quick_start[0], port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # Ctrl-C reaches a terminal's whole foreground process group
    )
    try:
        assert up.stdout is not None
        started = time.monotonic()
        line = ""
        while time.monotonic() - started < UP_TIMEOUT_S:
            line = up.stdout.readline()
            if not line or line.startswith("groupcoord is up"):
                break
        assert line.startswith(f"groupcoord is up: bootstrap 127.0.0.1:{port}"), line or "up exited"

        for words in quick_start[1:]:
            done = subprocess.run(as_run_here(words, port), capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (words, done.stdout, done.stderr)
            if words[0] == "status":
                rows = [r for r in done.stdout.splitlines() if r.split()[:1] and r.split()[0].isdigit()]
                assert len(rows) == 50 and all(" active " in r for r in rows), done.stdout
            if words[:2] == ["groups", "list"]:
                assert "Traceback" not in done.stderr, done.stderr

        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C
        assert up.wait(timeout=60) == 0
        with pytest.raises(ProcessLookupError):  # it stopped everything it started
            os.killpg(up.pid, 0)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
