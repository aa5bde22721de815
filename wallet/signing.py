"""Signatures on traces and on authenticated requests (the bytes covered are fixed by protocol.signing)."""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping

from protocol import AUTH_HEADERS, MAX_CLOCK_SKEW_S, SignedTrace, Trace
from protocol.signing import request_signing_bytes, trace_signing_bytes
from wallet.identity import Identity, verify_signature

__all__ = ["AuthError", "ReplayGuard", "sign_trace", "verify_trace", "request_headers", "verify_request"]

_HEX = frozenset("0123456789abcdef")


class AuthError(Exception):
    """A request's authentication is refused. ``code`` is the wire error code the node answers with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def sign_trace(identity: Identity, trace: Trace) -> SignedTrace:
    """Sign a trace; its ``contributor`` must be the signer's public key."""
    if trace.contributor != identity.public_key_hex:
        raise ValueError("trace.contributor is not this identity's public key")
    signature = identity.sign(trace_signing_bytes(trace.canonical()))
    return SignedTrace(trace=trace, signature=signature.hex())


def verify_trace(signed: SignedTrace) -> bool:
    """True when the signature is the trace contributor's, over the trace's canonical bytes."""
    data = trace_signing_bytes(signed.trace.canonical())
    return verify_signature(signed.trace.contributor, data, bytes.fromhex(signed.signature))


def request_headers(identity: Identity, method: str, path: str, body: bytes = b"") -> dict[str, str]:
    """The auth headers for one request: key, unix timestamp, a fresh 128-bit nonce, and the signature.

    ``path`` includes the query string, exactly as the node will see it.
    """
    timestamp = int(time.time())
    nonce = secrets.token_hex(16)
    signature = identity.sign(request_signing_bytes(method, path, timestamp, nonce, body))
    return {
        AUTH_HEADERS["key"]: identity.public_key_hex,
        AUTH_HEADERS["timestamp"]: str(timestamp),
        AUTH_HEADERS["nonce"]: nonce,
        AUTH_HEADERS["signature"]: signature.hex(),
    }


def _is_hex(value: str, length: int) -> bool:
    return len(value) == length and set(value) <= _HEX


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        for key, v in headers.items():
            if key.lower() == lowered:
                return v
    return value


def verify_request(
    headers: Mapping[str, str], method: str, path: str, body: bytes, *, now: float
) -> str:
    """The signer's public key (hex) if the request is signed and fresh; AuthError otherwise.

    Codes: ``missing_auth`` (a header is absent), ``bad_signature`` (malformed or not valid),
    ``stale_timestamp`` (further than protocol.MAX_CLOCK_SKEW_S from ``now``). Nonce reuse is the
    caller's check (the node stores the nonces it has seen; ReplayGuard is an in-memory one).
    """
    values = {field: _header(headers, name) for field, name in AUTH_HEADERS.items()}
    missing = [AUTH_HEADERS[f] for f, v in values.items() if not v]
    if missing:
        raise AuthError("missing_auth", f"Request is not signed: missing {', '.join(missing)}.")
    key, ts, nonce, sig = (str(values[f]).strip() for f in ("key", "timestamp", "nonce", "signature"))
    if not _is_hex(key, 64):
        raise AuthError("bad_signature", "Public key header is not 64 lower-case hex characters.")
    if not _is_hex(nonce, 32):
        raise AuthError("bad_signature", "Nonce header is not 32 lower-case hex characters.")
    if not _is_hex(sig, 128):
        raise AuthError("bad_signature", "Signature header is not 128 lower-case hex characters.")
    if not ts.isascii() or not ts.isdigit() or len(ts) > 12:
        raise AuthError("bad_signature", "Timestamp header is not a whole number of seconds.")
    timestamp = int(ts)
    if abs(now - timestamp) > MAX_CLOCK_SKEW_S:
        raise AuthError(
            "stale_timestamp",
            f"Request timestamp is {int(now - timestamp)} s from the node's clock (limit "
            f"{MAX_CLOCK_SKEW_S} s); set your computer's clock.",
        )
    data = request_signing_bytes(method, path, timestamp, nonce, body)
    if not verify_signature(key, data, bytes.fromhex(sig)):
        raise AuthError("bad_signature", "Signature is not valid for this key, method, path and body.")
    return key


class ReplayGuard:
    """Remembers nonces inside the clock-skew window and refuses one seen before (code ``replayed_nonce``).

    In memory and thread-safe; a node that restarts or runs several workers stores nonces in its database
    instead. Nonces older than twice the skew window are forgotten: their timestamps are stale anyway.
    """

    def __init__(self, *, window_s: float = 2 * MAX_CLOCK_SKEW_S, max_entries: int = 1_000_000) -> None:
        self._seen: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._window = window_s
        self._max = max_entries
        self._lock = threading.Lock()

    def check(self, public_key: str, nonce: str, *, now: float) -> None:
        """Record (key, nonce); raise AuthError('replayed_nonce') when it was seen before."""
        with self._lock:
            while self._seen:
                oldest_key, seen_at = next(iter(self._seen.items()))
                if now - seen_at <= self._window and len(self._seen) < self._max:
                    break
                del self._seen[oldest_key]
            if (public_key, nonce) in self._seen:
                raise AuthError("replayed_nonce", "Request nonce was already used; this looks like a replay.")
            self._seen[(public_key, nonce)] = now
