"""Compile ``proto/`` into Python modules: the one way generated code is produced.

``proto/groupcoord/<area>/v1/*.proto`` compile to ``groupcoord.<area>.v1.*_pb2`` (and
``*_pb2_grpc``). Generated files are never committed or edited, and importing ``groupcoord``
never runs this: a wheel build writes them into the build tree (``setup.py``), and an
editable checkout gets them in ``services/`` from ``pip install -e .`` or ``scripts/test``
(run ``python scripts/generate_protos.py`` after editing a ``.proto``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "proto"
SOURCE_ROOT = ROOT / "services"


def generate(output_root: Path = SOURCE_ROOT) -> list[Path]:
    """Run protoc over every ``.proto`` into ``output_root``; returns the sources compiled."""
    from grpc_tools import protoc  # noqa: PLC0415 - a build-time tool only

    sources = sorted(PROTO_ROOT.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    output_root.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={output_root}",
        f"--pyi_out={output_root}",
        f"--grpc_python_out={output_root}",
        *[str(s) for s in sources],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {PROTO_ROOT}")
    for src in sources:  # generated folders below groupcoord/ are regular packages
        folder = output_root / src.parent.relative_to(PROTO_ROOT)
        while folder.parent != output_root:
            (folder / "__init__.py").touch()
            folder = folder.parent
    return sources


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE_ROOT
    print(f"compiled {len(generate(out))} proto files into {out}")
