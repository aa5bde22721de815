"""Find a private key's bytes in files, in any common encoding. For tests: after a run, nothing under
TRACEMILL_HOME or the logs may contain the key (raw, hex, base64, base32, PEM/DER, decimal, or the
recovery phrase's words).

    from tests.keyscan import assert_no_key_material, assert_private_key_absent
    assert_no_key_material([home, logs_dir], identity)   # an Identity, or the 32-byte seed
    assert_private_key_absent(tracemill_home)            # unlocks the home's own key first
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Finding",
    "key_needles",
    "scan_bytes",
    "scan_paths",
    "assert_no_key_material",
    "assert_private_key_absent",
]

_WS = re.compile(rb"[\s\"',]|\\n|\\r|\\t")


@dataclass(frozen=True)
class Finding:
    path: Path
    encoding: str
    offset: int

    def __str__(self) -> str:
        return f"{self.path}: private key as {self.encoding} at byte {self.offset}"


def _seed_of(secret: Any) -> bytes:
    if isinstance(secret, (bytes, bytearray)):
        return bytes(secret)
    return bytes(secret.seed_bytes())


def _aligned(encode: Any, seed: bytes, block_in: int, block_out: int) -> list[bytes]:
    """The part of ``encode(prefix + seed + suffix)`` that depends only on the seed, for every offset of
    the seed inside a longer encoded blob (base64 works in 3-byte groups, base32 in 5-byte groups)."""
    out = []
    for shift in range(block_in):
        enc = encode(b"\0" * shift + seed).rstrip(b"=")
        head = -(-shift // block_in) * block_out + (block_out if shift else 0)
        tail_bytes = (shift + len(seed)) % block_in
        tail = block_out if tail_bytes else 0
        middle = enc[head : len(enc) - tail] if tail else enc[head:]
        if len(middle) >= 16:
            out.append(middle)
    return out


def key_needles(secret: Any) -> dict[str, list[bytes]]:
    """Byte strings that would betray the 32-byte seed, by encoding name."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from mnemonic import Mnemonic

    seed = _seed_of(secret)
    key = Ed25519PrivateKey.from_private_bytes(seed)
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    pem_body = b"".join(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).split(b"\n")[1:-2]
    )
    words = Mnemonic("english").to_mnemonic(seed).split()
    return {
        "raw bytes": [seed],
        "hex": [seed.hex().encode(), seed.hex().upper().encode()],
        "base64": _aligned(base64.b64encode, seed, 3, 4),
        "base64url": _aligned(base64.urlsafe_b64encode, seed, 3, 4),
        "base32": _aligned(base64.b32encode, seed, 5, 8)
        + [m.lower() for m in _aligned(base64.b32encode, seed, 5, 8)],
        "PKCS#8 DER": [der],
        "PEM": [pem_body],
        "decimal": [str(int.from_bytes(seed, "big")).encode(), str(int.from_bytes(seed, "little")).encode()],
        "recovery phrase": [" ".join(words[i : i + 4]).encode() for i in range(0, len(words) - 3)],
    }


def scan_bytes(data: bytes, needles: dict[str, list[bytes]]) -> list[tuple[str, int]]:
    """(encoding, offset) of each needle found in ``data``, also with whitespace and quotes removed
    (PEM line breaks, JSON escapes, CSV quoting)."""
    found = []
    squeezed = _WS.sub(b"", data)
    lowered = data.lower()
    for name, variants in needles.items():
        for needle in variants:
            if name == "recovery phrase":
                at = lowered.find(needle)
            else:
                at = data.find(needle)
                if at < 0 and len(needle) >= 16 and squeezed.find(_WS.sub(b"", needle)) >= 0:
                    at = squeezed.find(_WS.sub(b"", needle))
            if at >= 0:
                found.append((name, at))
                break
    return found


def scan_paths(roots: Iterable[Path], secret: Any) -> list[Finding]:
    """Every file under ``roots`` (files or folders, recursively) that holds the key in some encoding."""
    needles = key_needles(secret)
    findings = []
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            findings += [Finding(path, name, at) for name, at in scan_bytes(data, needles)]
    return findings


def assert_no_key_material(roots: Iterable[Path], secret: Any) -> int:
    """Fail (AssertionError listing where) if any file under ``roots`` holds the key; else return how
    many files were scanned, so a caller can check the scan actually saw something."""
    roots = [Path(r) for r in roots]
    findings = scan_paths(roots, secret)
    assert not findings, "private key found: " + "; ".join(str(f) for f in findings)
    return sum(1 if r.is_file() else sum(1 for p in r.rglob("*") if p.is_file()) for r in roots if r.exists())


def assert_private_key_absent(home: Path, *more_roots: Path, identity: Any = None) -> int:
    """The end-to-end check: unlock the key of the Tracemill home ``home`` (its encrypted file with
    $TRACEMILL_PASSPHRASE, or the OS keyring) unless ``identity`` is given, then assert that nothing under
    ``home`` (logs included) or ``more_roots`` holds it. Returns how many files were scanned."""
    if identity is None:
        from wallet.keystore import load_identity, read_info

        info = read_info(Path(home) / "wallet")
        assert info is not None, f"{home} has no wallet identity to scan for"
        identity = load_identity(Path(home) / "wallet", info)
    scanned = assert_no_key_material([Path(home), *more_roots], identity)
    assert scanned > 0, f"nothing to scan under {home}"
    return scanned
