"""The runtime's test shard (register_shard.py) needs its protos compiled beside it (``register_pb2``): done here,
before the test modules import it, so a plain ``pytest`` works without ``scripts/test``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "generate_protos", Path(__file__).resolve().parents[3] / "scripts" / "generate_protos.py"
)
assert _spec is not None and _spec.loader is not None
_generator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_generator)
_generator.generate_test_shard()
