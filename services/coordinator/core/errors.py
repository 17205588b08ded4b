"""Errors a core handler raises to answer a request with an exact Kafka error code.

Codes are kio's ``ErrorCode`` (the Kafka protocol's own table), so the gateway puts them on
the wire unchanged. Handlers raise :class:`CoordinatorError`; the dispatcher turns it into the
API's error response and writes no records.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class CoordinatorError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name.upper())
        self.code = code
        self.message = message


__all__ = ["CoordinatorError", "ErrorCode"]
