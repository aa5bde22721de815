"""Readable, checksummed wallet addresses: ``tm1`` + Bech32m of the 32-byte Ed25519 public key.

Bech32m (BIP 350) is used because its checksum catches every mistake of up to four characters and its
alphabet leaves out look-alikes (1, b, i, o). An address is case-insensitive and written lower-case.
"""

from __future__ import annotations

from wallet.errors import AddressError

__all__ = ["ADDRESS_HRP", "encode_address", "parse_address", "is_valid_address"]

ADDRESS_HRP = "tm"
_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32M_CONST = 0x2BC830A3
_KEY_LEN = 32


def _polymod(values: list[int]) -> int:
    gen = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if (top >> i) & 1 else 0
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _checksum(hrp: str, data: list[int]) -> list[int]:
    pm = _polymod(_hrp_expand(hrp) + data + [0] * 6) ^ _BECH32M_CONST
    return [(pm >> 5 * (5 - i)) & 31 for i in range(6)]


def _to_5bit(data: bytes) -> list[int]:
    acc, bits, out = 0, 0, []
    for b in data:
        acc = (acc << 8) | b
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append((acc >> bits) & 31)
    if bits:
        out.append((acc << (5 - bits)) & 31)
    return out


def _from_5bit(data: list[int]) -> bytes | None:
    acc, bits, out = 0, 0, bytearray()
    for v in data:
        acc = (acc << 5) | v
        bits += 5
        if bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    if bits >= 5 or (acc & ((1 << bits) - 1)):
        return None
    return bytes(out)


def encode_address(public_key: bytes | str) -> str:
    """The address of a public key (32 raw bytes or 64 hex characters)."""
    raw = bytes.fromhex(public_key) if isinstance(public_key, str) else bytes(public_key)
    if len(raw) != _KEY_LEN:
        raise ValueError("an Ed25519 public key is 32 bytes")
    data = _to_5bit(raw)
    return ADDRESS_HRP + "1" + "".join(_CHARSET[d] for d in data + _checksum(ADDRESS_HRP, data))


def parse_address(address: str) -> str:
    """The public key (hex) an address stands for; raises AddressError naming what is wrong."""
    text = address.strip()
    if text.lower() != text and text.upper() != text:
        raise AddressError("Address mixes upper and lower case; type it all in one case.")
    text = text.lower()
    prefix = ADDRESS_HRP + "1"
    if not text.startswith(prefix):
        raise AddressError(f"Not a Tracemill address: it must start with '{prefix}'.")
    body = text[len(prefix) :]
    bad = sorted({c for c in body if c not in _CHARSET})
    if bad:
        raise AddressError(f"Address contains characters that are never in an address: {''.join(bad)!r}.")
    expected_len = (_KEY_LEN * 8 + 4) // 5 + 6
    if len(body) != expected_len:
        raise AddressError(
            f"Address has {len(prefix) + len(body)} characters, expected {len(prefix) + expected_len}; "
            "a character is missing or extra."
        )
    values = [_CHARSET.index(c) for c in body]
    if _polymod(_hrp_expand(ADDRESS_HRP) + values) != _BECH32M_CONST:
        raise AddressError("Address checksum does not match: it was mistyped or copied incompletely.")
    raw = _from_5bit(values[:-6])
    if raw is None or len(raw) != _KEY_LEN:
        raise AddressError("Address does not encode a 32-byte public key.")
    return raw.hex()


def is_valid_address(address: str) -> bool:
    """True when ``address`` parses."""
    try:
        parse_address(address)
    except AddressError:
        return False
    return True
