"""The hostile-client suite's table: one row per attack, printed at the end of the run
(``conftest.pytest_terminal_summary``) so CI's log shows what each attack met."""

from __future__ import annotations

from dataclasses import dataclass

COLUMNS = ("attack", "what happened", "healthy errors", "gateway RSS MiB", "shards RSS MiB")


@dataclass(frozen=True)
class Row:
    attack: str
    outcome: str
    healthy_errors: int
    gateway_rss: tuple[float, float]  # before, after (MiB)
    shards_rss: tuple[float, float]

    def cells(self) -> tuple[str, ...]:
        def pair(p: tuple[float, float]) -> str:
            return f"{p[0]:.0f} -> {p[1]:.0f}"

        return (
            self.attack,
            self.outcome,
            str(self.healthy_errors),
            pair(self.gateway_rss),
            pair(self.shards_rss),
        )


ROWS: list[Row] = []


def table(rows: list[Row]) -> list[str]:
    cells = [COLUMNS, *(r.cells() for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = [" | ".join(c[i].ljust(widths[i]) for i in range(len(COLUMNS))) for c in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return lines
