"""Compile ``proto/`` into Python modules: the one way generated code is produced.

``proto/groupcoord/<area>/v1/*.proto`` compile to ``groupcoord.<area>.v1.*_pb2`` (and
``*_pb2_grpc``). Generated files are never committed or edited, and importing ``groupcoord``
never runs this: a wheel build writes them into the build tree (``setup.py``), and an
editable checkout gets them in ``services/`` from ``pip install -e .`` or ``scripts/test``
(run ``python scripts/generate_protos.py`` after editing a ``.proto``). The same run compiles
the runtime's test shard protos beside it in ``tests/coordinator/runtime``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "proto"
SOURCE_ROOT = ROOT / "services"
TEST_SHARD_DIR = ROOT / "tests" / "coordinator" / "runtime"
"""The runtime's test shard keeps its ``register.proto`` beside it (test code, not product)."""


def _protoc(proto_root: Path, sources: list[Path], output_root: Path) -> None:
    from grpc_tools import protoc  # noqa: PLC0415 - a build-time tool only

    include = Path(protoc.__file__).parent / "_proto"
    output_root.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{proto_root}",
        f"-I{include}",
        f"--python_out={output_root}",
        f"--pyi_out={output_root}",
        f"--grpc_python_out={output_root}",
        *[str(s) for s in sources],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {proto_root}")


def generate(output_root: Path = SOURCE_ROOT) -> list[Path]:
    """Compile the product's ``proto/`` into ``output_root``; returns the sources compiled."""
    sources = sorted(PROTO_ROOT.rglob("*.proto"))
    _protoc(PROTO_ROOT, sources, output_root)
    for src in sources:  # generated folders below groupcoord/ are regular packages
        folder = output_root / src.parent.relative_to(PROTO_ROOT)
        while folder.parent != output_root:
            (folder / "__init__.py").touch()
            folder = folder.parent
    return sources


def generate_test_shard() -> list[Path]:
    """Compile the test shard's protos next to it (``register_pb2`` and its gRPC stubs), for the
    tests and the runtime benchmarks that run it."""
    sources = sorted(TEST_SHARD_DIR.glob("*.proto"))
    _protoc(TEST_SHARD_DIR, sources, TEST_SHARD_DIR)
    return sources


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE_ROOT
    print(f"compiled {len(generate(out))} proto files into {out}")
    if out == SOURCE_ROOT:
        print(f"compiled {len(generate_test_shard())} test-shard proto files into {TEST_SHARD_DIR}")
