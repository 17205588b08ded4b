"""The cores' test doubles for the core benchmarks (heartbeat-core, offsets-core, classic-rebalance-core).

The mock clock and timer are test code (tests/coordinator/core/mock_timer.py): nothing in the
product uses them. Importing this module puts that folder on ``sys.path`` (as _register_shard.py
does for the runtime's test shard) and hands the two classes on.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

CORE_TESTS_DIR = Path(__file__).resolve().parents[1] / "tests" / "coordinator" / "core"
if str(CORE_TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(CORE_TESTS_DIR))

_mock_timer = importlib.import_module("mock_timer")
MockClock = _mock_timer.MockClock
MockTimer = _mock_timer.MockTimer
