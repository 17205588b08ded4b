"""Regular expression subscriptions (KIP-848 ``SubscribedTopicRegex``), with google-re2.

Kafka compiles subscriptions with RE2/J and matches whole topic names; we use google-re2
(linear time, no catastrophic backtracking on patterns clients send) the same way. A regex is
resolved against the topics image when a member first uses it and again whenever the topics
change; the resolution is a record (type 5), so replay knows the subscribed topics without
the image. Kafka's internal topics match as on Kafka 4.4; the coordinator's own (the image's
``hidden`` names) never do.
"""

from __future__ import annotations

import functools

import re2
from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.topics_image import TopicsImage

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad pattern is an answer, not a log line


@functools.lru_cache(maxsize=1024)
def compile_regex(regex: str) -> re2._Regexp:  # type: ignore[name-defined]
    """Compile or raise INVALID_REGULAR_EXPRESSION (Kafka's answer to a bad pattern)."""
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as e:
        message = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise CoordinatorError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {message}.",
        ) from e


def resolve(regex: str, image: TopicsImage) -> frozenset[str]:
    """The topic names of ``image`` that the whole regex matches, the coordinator's own excepted."""
    pattern = compile_regex(regex)
    hidden = image.hidden
    return frozenset(n for n in image.names() if n not in hidden and pattern.fullmatch(n) is not None)
