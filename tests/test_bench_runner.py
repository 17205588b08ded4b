"""``python bench/run.py --list`` (docs/usage.md's commands) after an install without the test
extra (the README's quick start installs ``.[local]``): every benchmark is listed, and running
one whose tools are missing ends with one line naming the extra, not a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"

# the test extra's modules a benchmark may need, made unimportable as in a plain install
WITHOUT_TEST_EXTRA = """
import runpy, sys
for name in ("grpc_tools", "confluent_kafka", "kafka", "pyspark"):
    sys.modules[name] = None
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path({run!r}, run_name="__main__")
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    code = WITHOUT_TEST_EXTRA.format(run=str(BENCH / "run.py"))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)


def test_every_benchmark_is_listed_without_the_test_extra() -> None:
    done = _run("--list")
    assert done.returncode == 0, done.stderr
    listed = dict(line.split("\t", 1) for line in done.stdout.splitlines())
    declared = {
        m.group(1)
        for path in BENCH.glob("*.py")
        if (m := re.search(r'^NAME = "([^"]+)"', path.read_text(), re.MULTILINE))
    }
    assert set(listed) == declared and "takeover" in listed
    assert all(description for description in listed.values())


def test_a_benchmark_without_its_tools_names_the_extra() -> None:
    done = _run("takeover")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "benchmark takeover needs grpc_tools: pip install -e '.[test]' (benchmarks use the test tools)"
    )
