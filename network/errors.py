"""The one exception a route raises to answer with an error: it becomes an ``ErrorBody``."""

from __future__ import annotations

__all__ = ["NodeHTTPError"]


class NodeHTTPError(Exception):
    """Answer ``status`` with ``{"code": code, "message": message}`` (see docs/protocol.md, errors)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
