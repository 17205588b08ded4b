"""ISO-8601 durations as Kafka's ``share.auto.offset.reset`` takes them (``by_duration:PT1H``):
one reading for the coordinator, which validates the group config, and the gateway, which turns
it into a ListOffsets timestamp."""

from __future__ import annotations

import re
from datetime import timedelta

# PnDTnHnMn.nS with at least one part, no sign: Kafka refuses a negative duration there
_NON_NEGATIVE = re.compile(r"P(?=\d|T\d)(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def non_negative_duration(text: str) -> timedelta | None:
    """``text`` as a duration, or None when it is not a non-negative ``PnDTnHnMn.nS``."""
    match = _NON_NEGATIVE.fullmatch(text)
    if match is None:
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
