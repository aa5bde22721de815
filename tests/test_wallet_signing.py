"""Trace signatures and signed requests (the node's nonce store is tested by the node's own tests)."""

from __future__ import annotations

import time

import pytest

from protocol import AUTH_HEADERS, MAX_CLOCK_SKEW_S, SignedTrace, Trace, Verdict
from wallet.identity import Identity, verify_signature
from wallet.signing import AuthError, ReplayGuard, request_headers, sign_trace, verify_request, verify_trace


def make_trace(identity: Identity, completion: str = "The answer is 42.") -> Trace:
    return Trace(
        lease_id="lease-1",
        task_id="task-1",
        sample_index=0,
        contributor=identity.public_key_hex,
        model_sha256="ab" * 32,
        seed=7,
        completion=completion,
        token_ids=[1, 2, 3],
        logprobs=[-0.5, -0.25, -1.0],
        prompt_tokens=12,
        verdict=Verdict(score=1.0, passed=True, reason="correct", verifier="math"),
        created_at=1700000000.5,
    )


def test_identity_from_seed_is_deterministic_and_signs() -> None:
    seed = bytes(range(32))
    a, b = Identity.from_seed(seed), Identity.from_seed(seed)
    assert a == b and a.public_key_hex == b.public_key_hex and a.address == b.address
    sig = a.sign(b"hello")
    assert len(sig) == 64 and verify_signature(a.public_key_hex, b"hello", sig)
    assert not verify_signature(a.public_key_hex, b"hellO", sig)
    assert seed.hex() not in repr(a) and a.address in repr(a)


def test_signed_trace_verifies_and_tampering_is_caught() -> None:
    me = Identity.generate()
    signed = sign_trace(me, make_trace(me))
    assert verify_trace(signed)
    # Round trip through the wire form keeps the signature valid.
    assert verify_trace(SignedTrace.model_validate_json(signed.model_dump_json()))
    tampered = SignedTrace(trace=make_trace(me, "The answer is 43."), signature=signed.signature)
    assert not verify_trace(tampered)


def test_a_trace_claimed_by_someone_else_does_not_verify() -> None:
    me, other = Identity.generate(), Identity.generate()
    with pytest.raises(ValueError):
        sign_trace(me, make_trace(other))
    mine = sign_trace(me, make_trace(me))
    stolen = SignedTrace(trace=make_trace(other), signature=mine.signature)
    assert not verify_trace(stolen)


def test_request_headers_carry_key_timestamp_nonce_and_signature() -> None:
    me = Identity.generate()
    before = int(time.time())
    h = request_headers(me, "POST", "/v1/traces", b'{"a":1}')
    assert set(h) == set(AUTH_HEADERS.values())
    assert h[AUTH_HEADERS["key"]] == me.public_key_hex
    assert before <= int(h[AUTH_HEADERS["timestamp"]]) <= int(time.time())
    nonce = h[AUTH_HEADERS["nonce"]]
    assert len(nonce) == 32 and int(nonce, 16) >= 0
    nonces = {request_headers(me, "GET", "/x", b"")[AUTH_HEADERS["nonce"]] for _ in range(200)}
    assert len(nonces) == 200


def test_verify_request_returns_the_signer() -> None:
    me = Identity.generate()
    h = request_headers(me, "post", "/v1/traces?x=1", b"body")
    now = float(h[AUTH_HEADERS["timestamp"]])
    assert verify_request(h, "POST", "/v1/traces?x=1", b"body", now=now) == me.public_key_hex
    # Header names are case-insensitive, as HTTP's are.
    lowered = {k.lower(): v for k, v in h.items()}
    assert verify_request(lowered, "POST", "/v1/traces?x=1", b"body", now=now) == me.public_key_hex


@pytest.mark.parametrize("field", sorted(AUTH_HEADERS))
def test_missing_header_is_missing_auth(field: str) -> None:
    h = request_headers(Identity.generate(), "GET", "/v1/x", b"")
    del h[AUTH_HEADERS[field]]
    with pytest.raises(AuthError) as err:
        verify_request(h, "GET", "/v1/x", b"", now=time.time())
    assert err.value.code == "missing_auth" and AUTH_HEADERS[field] in err.value.message


@pytest.mark.parametrize(
    "method,path,body",
    [("PUT", "/v1/x", b"b"), ("POST", "/v1/y", b"b"), ("POST", "/v1/x?q=1", b"b"), ("POST", "/v1/x", b"c")],
)
def test_any_change_to_method_path_or_body_is_bad_signature(method: str, path: str, body: bytes) -> None:
    h = request_headers(Identity.generate(), "POST", "/v1/x", b"b")
    with pytest.raises(AuthError) as err:
        verify_request(h, method, path, body, now=time.time())
    assert err.value.code == "bad_signature"


def test_changed_nonce_timestamp_or_key_is_bad_signature() -> None:
    h = request_headers(Identity.generate(), "POST", "/v1/x", b"b")
    now = float(h[AUTH_HEADERS["timestamp"]])
    for field, value in [
        ("nonce", "0" * 32),
        ("timestamp", str(int(now) - 1)),
        ("key", Identity.generate().public_key_hex),
        ("signature", "00" * 64),
        ("signature", "zz"),
        ("timestamp", "-5"),
        ("nonce", "abc"),
    ]:
        forged = dict(h, **{AUTH_HEADERS[field]: value})
        with pytest.raises(AuthError) as err:
            verify_request(forged, "POST", "/v1/x", b"b", now=now)
        assert err.value.code == "bad_signature", (field, value)


def test_stale_timestamps_are_refused_both_ways() -> None:
    h = request_headers(Identity.generate(), "GET", "/v1/x", b"")
    ts = int(h[AUTH_HEADERS["timestamp"]])
    for now in (ts + MAX_CLOCK_SKEW_S, ts - MAX_CLOCK_SKEW_S):
        verify_request(h, "GET", "/v1/x", b"", now=now)
    for now in (ts + MAX_CLOCK_SKEW_S + 1, ts - MAX_CLOCK_SKEW_S - 1, ts + 86400):
        with pytest.raises(AuthError) as err:
            verify_request(h, "GET", "/v1/x", b"", now=now)
        assert err.value.code == "stale_timestamp"


def test_replayed_request_is_refused_by_the_replay_guard() -> None:
    me = Identity.generate()
    guard = ReplayGuard()
    h = request_headers(me, "POST", "/v1/traces", b"{}")
    now = float(h[AUTH_HEADERS["timestamp"]])
    key = verify_request(h, "POST", "/v1/traces", b"{}", now=now)
    guard.check(key, h[AUTH_HEADERS["nonce"]], now=now)
    # The same bytes sent again verify (the signature is still valid) but the nonce was seen.
    key = verify_request(h, "POST", "/v1/traces", b"{}", now=now + 1)
    with pytest.raises(AuthError) as err:
        guard.check(key, h[AUTH_HEADERS["nonce"]], now=now + 1)
    assert err.value.code == "replayed_nonce"
    # Another request, and the same nonce from another key, are fine.
    h2 = request_headers(me, "POST", "/v1/traces", b"{}")
    guard.check(me.public_key_hex, h2[AUTH_HEADERS["nonce"]], now=now + 1)
    guard.check(Identity.generate().public_key_hex, h[AUTH_HEADERS["nonce"]], now=now + 1)
    # Replayed after the window, the timestamp is stale.
    with pytest.raises(AuthError) as err:
        verify_request(h, "POST", "/v1/traces", b"{}", now=now + MAX_CLOCK_SKEW_S + 1)
    assert err.value.code == "stale_timestamp"
