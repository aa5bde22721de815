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

__all__ = ["canonical_bytes", "sha256_hex", "task_seed"]


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


def task_seed(lease_seed: int, task_id: str) -> int:
    """The sampling seed of one task in a lease: the first 8 bytes of
    sha256("{lease_seed}:{task_id}") as a big-endian integer, top bit cleared (fits int64).

    The node assigns one seed per lease; deriving one per task keeps two tasks of a lease from
    sharing sampler noise, and anyone can recompute it to replay a trace.
    """
    digest = hashlib.sha256(f"{lease_seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)
