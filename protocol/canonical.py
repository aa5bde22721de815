"""Canonical bytes and content hashes: the one encoding every signature and id is computed over.

Canonical form is JSON with keys sorted, no insignificant whitespace, UTF-8 (non-ASCII kept as is),
and floats written by Python's shortest round-trip repr. Two implementations that follow these rules
produce the same bytes for the same value, so a trace id is the same on the client and the node.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

__all__ = ["canonical_bytes", "sha256_hex"]


def _check_finite(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("canonical form has no NaN or infinity")
    if isinstance(value, dict):
        for v in value.values():
            _check_finite(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_finite(v)


def canonical_bytes(value: Any) -> bytes:
    """Encode a JSON-compatible value (dicts, lists, str, int, float, bool, None) canonically."""
    _check_finite(value)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()
