"""Errors a core handler raises to answer a request with an exact Kafka error code.

Codes are kio's ``ErrorCode`` (the Kafka protocol's own table), imported from
``kio.schema.errors`` everywhere: one door, so the gateway puts them on the wire unchanged. Handlers raise :class:`CoordinatorError`; the dispatcher turns it into the
API's error response and writes no records.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.message import Message
from kio.schema.errors import ErrorCode

M = TypeVar("M", bound=Message)


class CoordinatorError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name.upper())
        self.code = code
        self.message = message


def error_response(response_type: type[M], error: CoordinatorError, **fields: Any) -> M:
    """An API's response carrying ``error`` (its code, and its message when it has one)."""
    response = response_type(error_code=error.code.value, **fields)
    if error.message is not None:
        response.error_message = error.message  # type: ignore[attr-defined]
    return response


__all__ = ["CoordinatorError", "error_response"]
