"""The encrypted key file: scrypt turns a passphrase into an AES-256-GCM key; the salt, the scrypt
parameters and the (public) address sit beside the ciphertext and are bound to it as associated data.

The same format is used for ``wallet/key.enc`` and for backups, so any of them can be restored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from protocol.canonical import canonical_bytes
from wallet.errors import CorruptFileError, WrongPassphraseError
from wallet.files import atomic_write
from wallet.identity import SEED_LEN, Identity
from wallet.passphrase import normalize

__all__ = [
    "FORMAT", "KdfParams", "DEFAULT_KDF", "seal", "unseal", "write_sealed", "read_sealed", "peek_address",
]

FORMAT = "tracemill-key"
VERSION = 1
_SALT_LEN = 16
_NONCE_LEN = 12
_CHECK_LEN = 16
# Refuse parameters a hostile file could use to exhaust memory or time (scrypt needs 128 * n * r bytes).
_MAX_N, _MAX_R, _MAX_P, _MAX_MEM = 2**20, 32, 16, 2**30


@dataclass(frozen=True)
class KdfParams:
    """scrypt cost. The default (n=2**17, r=8, p=1: 128 MiB, about half a second) is for real keys;
    tests may pass a lower ``n`` through the ``kdf=`` parameter of the wallet functions."""

    n: int = 2**17
    r: int = 8
    p: int = 1

    def __post_init__(self) -> None:
        if self.n < 2 or self.n & (self.n - 1) or self.n > _MAX_N:
            raise ValueError("scrypt n must be a power of two no larger than 2**20")
        if not (1 <= self.r <= _MAX_R and 1 <= self.p <= _MAX_P) or 128 * self.n * self.r > _MAX_MEM:
            raise ValueError("scrypt r or p out of range, or more than 1 GiB of memory")


DEFAULT_KDF = KdfParams()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("expected base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


def _derive(passphrase: str, salt: bytes, kdf: KdfParams) -> tuple[bytes, bytes]:
    out = Scrypt(salt=salt, length=32 + _CHECK_LEN, n=kdf.n, r=kdf.r, p=kdf.p).derive(normalize(passphrase))
    return out[:32], out[32:]


def _header_bytes(doc: dict[str, Any]) -> bytes:
    return canonical_bytes({k: v for k, v in doc.items() if k not in ("ciphertext", "header_sha256")})


def _header_digest(doc: dict[str, Any]) -> str:
    # Tells a damaged header (salt, parameters) apart from a wrong passphrase.
    return hashlib.sha256(_header_bytes(doc)).hexdigest()


def seal(identity: Identity, passphrase: str, *, kdf: KdfParams | None = None) -> bytes:
    """The encrypted-file bytes holding ``identity``'s seed."""
    kdf = kdf or DEFAULT_KDF
    salt, nonce = os.urandom(_SALT_LEN), os.urandom(_NONCE_LEN)
    key, check = _derive(passphrase, salt, kdf)
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "address": identity.address,
        "public_key": identity.public_key_hex,
        "created_at": int(time.time()),
        "kdf": {"name": "scrypt", "n": kdf.n, "r": kdf.r, "p": kdf.p, "salt": _b64(salt)},
        "cipher": {"name": "aes-256-gcm", "nonce": _b64(nonce)},
        "check": check.hex(),
    }
    doc["header_sha256"] = _header_digest(doc)
    doc["ciphertext"] = _b64(AESGCM(key).encrypt(nonce, identity.seed_bytes(), _header_bytes(doc)))
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _parse(data: bytes, where: str) -> tuple[dict[str, Any], KdfParams, bytes, bytes, bytes]:
    try:
        doc = json.loads(data.decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise CorruptFileError(f"{where} is not a Tracemill key or backup file.")
        if doc.get("version") != VERSION:
            raise CorruptFileError(f"{where} has format version {doc.get('version')!r}; update Tracemill.")
        k = doc["kdf"]
        if k["name"] != "scrypt" or doc["cipher"]["name"] != "aes-256-gcm":
            raise CorruptFileError(f"{where} uses an unknown cipher or key derivation.")
        kdf = KdfParams(n=int(k["n"]), r=int(k["r"]), p=int(k["p"]))
        salt, nonce = _unb64(k["salt"]), _unb64(doc["cipher"]["nonce"])
        ciphertext = _unb64(doc["ciphertext"])
        str(doc["public_key"]), bytes.fromhex(doc["check"])
        if not hmac.compare_digest(_header_digest(doc), str(doc["header_sha256"])):
            raise CorruptFileError(f"{where} is damaged (its header does not match); use another backup.")
    except CorruptFileError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{where} is damaged ({type(exc).__name__}); use another backup.") from None
    return doc, kdf, salt, nonce, ciphertext


def unseal(data: bytes, passphrase: str, *, where: str = "The key file") -> Identity:
    """The identity in an encrypted file. WrongPassphraseError or CorruptFileError, never a partial key."""
    doc, kdf, salt, nonce, ciphertext = _parse(data, where)
    key, check = _derive(passphrase, salt, kdf)
    if not hmac.compare_digest(check.hex(), str(doc["check"])):
        raise WrongPassphraseError(f"Wrong passphrase for {where.lower()}; try again (it is case-sensitive).")
    try:
        seed = AESGCM(key).decrypt(nonce, ciphertext, _header_bytes(doc))
    except InvalidTag:
        raise CorruptFileError(f"{where} is damaged (integrity check failed); use another backup.") from None
    if len(seed) != SEED_LEN:
        raise CorruptFileError(f"{where} holds no valid key.")
    identity = Identity.from_seed(seed)
    if identity.public_key_hex != doc["public_key"]:
        raise CorruptFileError(f"{where} holds a key that does not match its address.")
    return identity


def write_sealed(path: Path, identity: Identity, passphrase: str, *, kdf: KdfParams | None = None) -> None:
    """Encrypt ``identity`` to ``path`` atomically, readable by the owner only."""
    atomic_write(path, seal(identity, passphrase, kdf=kdf))


def read_sealed(path: Path, passphrase: str) -> Identity:
    """Decrypt the key file or backup at ``path``."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise CorruptFileError(f"No such file: {path}") from None
    return unseal(data, passphrase, where=f"The file {Path(path).name}")


def peek_address(path: Path) -> str:
    """The address a key file or backup claims to hold, read without the passphrase."""
    doc, *_ = _parse(Path(path).read_bytes(), f"The file {Path(path).name}")
    return str(doc["address"])
