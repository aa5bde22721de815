"""What a signed request covers. The keys and the signing itself live in wallet/."""

from __future__ import annotations

import hashlib

__all__ = ["AUTH_HEADERS", "MAX_CLOCK_SKEW_S", "request_signing_bytes", "trace_signing_bytes"]

#: Header names of an authenticated request: public key, unix timestamp, nonce, signature (all hex
#: except the timestamp, a decimal integer of seconds).
AUTH_HEADERS = {
    "key": "X-Tracemill-Key",
    "timestamp": "X-Tracemill-Timestamp",
    "nonce": "X-Tracemill-Nonce",
    "signature": "X-Tracemill-Signature",
}

#: A node refuses a request whose timestamp is further than this from its own clock.
MAX_CLOCK_SKEW_S = 300


def request_signing_bytes(method: str, path: str, timestamp: int, nonce: str, body: bytes) -> bytes:
    """The bytes an authenticated request's signature covers.

    ``tracemill-request-v1\\n{METHOD}\\n{path}\\n{timestamp}\\n{nonce}\\n{sha256(body) hex}``; the path
    includes the query string, if any.
    """
    body_hash = hashlib.sha256(body).hexdigest()
    return f"tracemill-request-v1\n{method.upper()}\n{path}\n{timestamp}\n{nonce}\n{body_hash}".encode()


def trace_signing_bytes(canonical_trace: bytes) -> bytes:
    """The bytes a trace signature covers: a domain tag, then the trace's canonical bytes."""
    return b"tracemill-trace-v1\n" + canonical_trace
