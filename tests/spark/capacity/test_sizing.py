"""The sizing model's arithmetic, without Spark."""

from __future__ import annotations

import pytest

from groupcoord_spark.capacity.sizing import observed_growth_per_day


def test_observed_growth_is_the_relative_slope_per_day() -> None:
    # Busy cores 1.0 at t=0 rising linearly to 3.0 after two days: slope 1.0/day, mean 2.0.
    cluster = [{"bucket": t, "busy_cores": 1.0 + t / 86400} for t in range(0, 2 * 86400 + 1, 600)]
    assert observed_growth_per_day(cluster, 600) == pytest.approx(1.0 / 2.0)
    assert observed_growth_per_day(cluster[:100], 600) is None  # under a day
