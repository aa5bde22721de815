"""Signed requests: the signature is checked by ``wallet.signing``; nonces are remembered here.

A signed request carries the signer's public key, a timestamp, a fresh nonce and an Ed25519 signature
over ``protocol.request_signing_bytes`` (docs/protocol.md, "Request signing"). The node refuses a
request whose nonce it has seen before, so a captured request cannot be played again.
"""

from __future__ import annotations

from collections.abc import Mapping

from network.errors import NodeHTTPError
from network.storage import Storage
from protocol import AUTH_HEADERS, MAX_CLOCK_SKEW_S

__all__ = ["authenticate"]

_NONCE_MAX_LEN = 128


def authenticate(
    storage: Storage,
    headers: Mapping[str, str],
    method: str,
    path: str,
    body: bytes,
    *,
    now: float,
) -> str:
    """Check a signed request and record its nonce; returns the signer's public key (hex).

    Raises NodeHTTPError 401 with code ``missing_auth``, ``bad_signature``, ``stale_timestamp`` or
    ``replayed_nonce``. Registers the signer as a contributor in the same transaction as the nonce.
    """
    from wallet.signing import AuthError, verify_request

    try:
        public_key = verify_request(headers, method, path, body, now=now)
    except AuthError as exc:
        code = getattr(exc, "code", "bad_signature")
        raise NodeHTTPError(401, code, getattr(exc, "message", str(exc))) from exc
    nonce = headers.get(AUTH_HEADERS["nonce"], "")
    if not nonce or len(nonce) > _NONCE_MAX_LEN:
        raise NodeHTTPError(401, "missing_auth", f"{AUTH_HEADERS['nonce']} is missing or too long")
    # A nonce only needs remembering while its timestamp is still fresh; keep it a little longer.
    if not storage.use_nonce(public_key, nonce, now=now, expires_at=now + 2 * MAX_CLOCK_SKEW_S):
        raise NodeHTTPError(401, "replayed_nonce", "this request's nonce was used before; sign a new request")
    return public_key
