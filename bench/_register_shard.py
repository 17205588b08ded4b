"""The runtime's test shard for the runtime benchmarks (takeover, threads).

The register test shard is test code (tests/coordinator/runtime/register_shard.py, with its
register.proto beside it). Importing this module compiles that proto (a checkout's
benchmarks must not depend on scripts/test having run) and puts the test shard's folder on
``sys.path``, where ``register_shard`` and ``register_pb2`` are then found.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():  # scripts/ is not a package: load the one proto generator by path
    spec = importlib.util.spec_from_file_location("generate_protos", ROOT / "scripts" / "generate_protos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_generate = _generator()
_generate.generate_test_shard()
REGISTER_SHARD_DIR: Path = _generate.TEST_SHARD_DIR
if str(REGISTER_SHARD_DIR) not in sys.path:
    sys.path.insert(0, str(REGISTER_SHARD_DIR))

register_pb2 = importlib.import_module("register_pb2")
register_pb2_grpc = importlib.import_module("register_pb2_grpc")
register_shard = importlib.import_module("register_shard")
