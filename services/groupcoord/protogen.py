"""Compile ``proto/`` into Python modules: the one way generated code is produced.

The ``.proto`` files under ``proto/groupcoord/...`` compile to ``groupcoord.<area>.v1.*_pb2``
(and ``*_pb2_grpc``) next to this package. Generated files are never committed or edited: a
wheel build runs :func:`generate` (see ``setup.py``), and an editable checkout regenerates on
import whenever the sources' digest differs from the stamp written by the last run. A file lock
makes concurrent processes (shards, test workers) agree on a single generation.
"""

from __future__ import annotations

import fcntl
import hashlib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
OUTPUT_ROOT = PACKAGE_DIR.parent  # protoc writes groupcoord/<area>/v1/... below this
PROTO_ROOT = PACKAGE_DIR.parents[1] / "proto"
STAMP = PACKAGE_DIR / ".protogen-stamp"


def _sources() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto")) if PROTO_ROOT.is_dir() else []


def _digest(sources: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sources:
        h.update(str(path.relative_to(PROTO_ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _ensure_packages(sources: list[Path]) -> None:
    """Generated folders need ``__init__.py`` files to be regular packages."""
    for src in sources:
        folder = OUTPUT_ROOT / src.parent.relative_to(PROTO_ROOT)
        while folder != PACKAGE_DIR and folder != OUTPUT_ROOT:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()
            folder = folder.parent


def generate(force: bool = False) -> bool:
    """Regenerate if the proto sources changed (or ``force``). Returns True when it ran protoc."""
    sources = _sources()
    if not sources:  # an installed wheel: code was generated at build time
        return False
    digest = _digest(sources)
    if not force and STAMP.exists() and STAMP.read_text() == digest:
        return False
    with open(PACKAGE_DIR / ".protogen.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and STAMP.exists() and STAMP.read_text() == digest:
            return False
        from grpc_tools import protoc  # noqa: PLC0415 - only needed when regenerating

        include = Path(protoc.__file__).parent / "_proto"
        args = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"--python_out={OUTPUT_ROOT}",
            f"--pyi_out={OUTPUT_ROOT}",
            f"--grpc_python_out={OUTPUT_ROOT}",
            *[str(s) for s in sources],
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed for {PROTO_ROOT}")
        _ensure_packages(sources)
        STAMP.write_text(digest)
    return True
