"""Benchmark runner: ``python bench/run.py --list`` names them, ``python bench/run.py NAME`` prints JSON.

Each benchmark is a module ``bench/<name with - as _>.py`` defining ``NAME`` (str),
``DESCRIPTION`` (str) and ``run(args: list[str]) -> dict``; the dict (figures, and a baseline
measured in the same run with ratios where one applies) is printed as one JSON object.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def _benchmarks() -> dict[str, ModuleType]:
    sys.path.insert(0, str(HERE))
    found: dict[str, ModuleType] = {}
    for path in sorted(HERE.glob("*.py")):
        if path.stem in {"run", "__init__"} or path.stem.startswith("_"):
            continue
        module = importlib.import_module(path.stem)
        name = getattr(module, "NAME", None)
        if isinstance(name, str) and callable(getattr(module, "run", None)):
            found[name] = module
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", nargs="?", help="benchmark to run")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    args, rest = parser.parse_known_args(argv)
    benches = _benchmarks()
    if args.list or not args.name:
        for name, module in benches.items():
            print(f"{name}\t{getattr(module, 'DESCRIPTION', '')}")
        return 0
    if args.name not in benches:
        parser.error(f"unknown benchmark {args.name!r}; known: {', '.join(benches)}")
    result = benches[args.name].run(rest)
    print(json.dumps({"benchmark": args.name, **result}, indent=2, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
