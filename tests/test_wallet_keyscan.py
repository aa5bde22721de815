"""The key scanner itself: it must find the key in every encoding it claims, and nothing in clean data."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.keyscan import assert_no_key_material, key_needles, scan_bytes, scan_paths
from wallet.backup import recovery_phrase
from wallet.identity import Identity


def encodings(seed: bytes, pad: bytes) -> dict[str, bytes]:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    ssh = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                            serialization.NoEncryption())
    return {
        "raw": pad + seed + pad,
        "hex": (pad.hex() + seed.hex() + pad.hex()).encode(),
        "HEX": (seed.hex().upper()).encode(),
        "base64 inside a blob": base64.b64encode(pad + seed + pad),
        "base64url": base64.urlsafe_b64encode(pad + seed),
        "base32": base64.b32encode(pad + seed),
        "PEM": pem,
        "PEM inside JSON": json.dumps({"key": pem.decode()}).encode(),
        "OpenSSH": ssh,
        "DER": key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()),
        "decimal": str(int.from_bytes(seed, "big")).encode(),
        "phrase": recovery_phrase(Identity.from_seed(seed)).upper().encode(),
    }


@pytest.mark.parametrize("pad_len", range(6))
def test_every_encoding_is_found_at_every_alignment(pad_len: int) -> None:
    seed = os.urandom(32)
    needles = key_needles(seed)
    for name, data in encodings(seed, os.urandom(pad_len)).items():
        assert scan_bytes(b"log line: " + data + b"\n", needles), name


def test_clean_data_and_other_keys_are_not_reported(tmp_path: Path) -> None:
    seed = os.urandom(32)
    other = Identity.generate()
    (tmp_path / "noise.bin").write_bytes(os.urandom(200_000))
    (tmp_path / "other.txt").write_bytes(b"\n".join(encodings(other.seed_bytes(), b"x").values()))
    me = Identity.from_seed(seed)
    (tmp_path / "public.txt").write_text(f"{me.public_key_hex} {me.address}")
    assert scan_paths([tmp_path], seed) == []
    assert assert_no_key_material([tmp_path], me) == 3


def test_assert_no_key_material_names_the_file(tmp_path: Path) -> None:
    me = Identity.generate()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "leak.log").write_text("seed=" + base64.b64encode(me.seed_bytes()).decode())
    with pytest.raises(AssertionError, match="leak.log"):
        assert_no_key_material([tmp_path], me)


def test_assert_private_key_absent_unlocks_the_homes_own_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.keyscan import assert_private_key_absent
    from wallet.keystore import load_or_create_identity
    from wallet.sealed import KdfParams

    monkeypatch.setenv("TRACEMILL_KEYSTORE", "file")
    monkeypatch.setenv("TRACEMILL_PASSPHRASE", "correct horse battery staple 42")
    home = tmp_path / "home"
    me, _ = load_or_create_identity(home / "wallet", passphrase=None, kdf=KdfParams(n=2**10))
    (home / "logs").mkdir()
    (home / "logs" / "tracemill.log").write_text(f"signed as {me.address}\n")
    assert assert_private_key_absent(home) >= 3
    (home / "logs" / "tracemill.log").write_text(f"oops {me.seed_bytes().hex()}\n")
    with pytest.raises(AssertionError, match=r"tracemill.log: private key as hex"):
        assert_private_key_absent(home)
