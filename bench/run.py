"""Benchmark runner: ``python bench/run.py --list`` names them, ``python bench/run.py NAME`` prints JSON.

Each benchmark is a module ``bench/<name with - as _>.py`` defining ``NAME`` (str),
``DESCRIPTION`` (str) and ``run(args: list[str]) -> dict``; the dict (figures, and a baseline
measured in the same run with ratios where one applies) is printed as one JSON object.

The list is read from the modules' source, not imported: most benchmarks drive real clients
and test tools (the ``test`` extra), and the README's plain install must still list them. A
benchmark whose dependency is missing ends with one line naming the extra.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The test harness (testing/groupcoord_testing): a source root of its own, not in the wheel.
TESTING = HERE.parent / "testing"


def _declared(path: Path) -> tuple[str, str] | None:
    """(NAME, DESCRIPTION) as the module assigns them at top level, or None if it is no benchmark."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    found[target.id] = node.value.value
    return (found["NAME"], found.get("DESCRIPTION", "")) if "NAME" in found else None


def benchmarks() -> dict[str, tuple[Path, str]]:
    """Every benchmark: name -> (module file, description)."""
    found: dict[str, tuple[Path, str]] = {}
    for path in sorted(HERE.glob("*.py")):
        if path.stem in {"run", "__init__"} or path.stem.startswith("_"):
            continue
        declared = _declared(path)
        if declared is not None:
            found[declared[0]] = (path, declared[1])
    return found


def _load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages: a figure means something only on a
    machine with nothing else running, and every run says whether it had one."""
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", nargs="?", help="benchmark to run")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    args, rest = parser.parse_known_args(argv)
    benches = benchmarks()
    if args.list or not args.name:
        for name, (_, description) in benches.items():
            print(f"{name}\t{description}")
        return 0
    if args.name not in benches:
        parser.error(f"unknown benchmark {args.name!r}; known: {', '.join(benches)}")
    sys.path[:0] = [str(HERE), str(TESTING)]
    try:
        module = importlib.import_module(benches[args.name][0].stem)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "a module").split(".")[0]
        raise SystemExit(
            f"benchmark {args.name} needs {missing}: pip install -e '.[test]' (benchmarks use the test tools)"
        ) from None
    before = _load_average()
    result = module.run(rest)
    loads = {"load_average_before": before, "load_average_after": _load_average()}
    print(json.dumps({"benchmark": args.name, **loads, **result}, indent=2, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
