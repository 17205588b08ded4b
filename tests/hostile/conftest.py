"""Prints the hostile-client table after the run (see ``report.py``)."""

from __future__ import annotations

from typing import Any

from hostile.report import ROWS, table


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if ROWS:
        terminalreporter.section("hostile clients: attack -> outcome -> healthy groups' errors -> RSS")
        for line in table(ROWS):
            terminalreporter.write_line(line)
