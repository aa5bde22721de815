"""The user's Ed25519 identity: a 32-byte seed, the public key it gives, and the address of that key."""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from wallet.address import encode_address

__all__ = ["SEED_LEN", "Identity", "verify_signature"]

SEED_LEN = 32


class Identity:
    """A key pair that can sign. Its repr and str never show the private key."""

    __slots__ = ("_key", "_public_key_hex")

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        raw = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self._public_key_hex = raw.hex()

    @classmethod
    def generate(cls) -> Identity:
        """A new identity from the operating system's random source."""
        return cls.from_seed(os.urandom(SEED_LEN))

    @classmethod
    def from_seed(cls, seed: bytes) -> Identity:
        """The identity a 32-byte seed gives (the same seed gives the same key everywhere)."""
        if len(seed) != SEED_LEN:
            raise ValueError("an Ed25519 seed is 32 bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(bytes(seed)))

    @property
    def public_key_hex(self) -> str:
        """The public key, 64 lower-case hex characters (what the wire protocol carries)."""
        return self._public_key_hex

    @property
    def address(self) -> str:
        """The readable, checksummed form of the public key (``tm1…``)."""
        return encode_address(self._public_key_hex)

    def sign(self, data: bytes) -> bytes:
        """A 64-byte Ed25519 signature of ``data``."""
        return self._key.sign(data)

    def seed_bytes(self) -> bytes:
        """The 32-byte private seed. Only for the keystore, backups and tests; never log it."""
        return self._key.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )

    def __repr__(self) -> str:
        return f"Identity(address={self.address!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other._public_key_hex == self._public_key_hex

    def __hash__(self) -> int:
        return hash(self._public_key_hex)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("an Identity is not pickled, so its key never leaves the process by accident")


def verify_signature(public_key_hex: str, data: bytes, signature: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``data`` by ``public_key_hex``."""
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key_hex))
        key.verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True
