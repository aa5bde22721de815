"""tm1 addresses: round trip, and every single-character mistake is caught with a clear message."""

from __future__ import annotations

import pytest

from wallet.address import _CHARSET, encode_address, is_valid_address, parse_address
from wallet.errors import AddressError
from wallet.identity import Identity


def test_address_round_trips_and_is_readable() -> None:
    for _ in range(50):
        me = Identity.generate()
        addr = me.address
        assert addr.startswith("tm1") and len(addr) == 61 and addr == addr.lower()
        assert parse_address(addr) == me.public_key_hex
        assert parse_address(addr.upper()) == me.public_key_hex
        assert parse_address(f"  {addr}\n") == me.public_key_hex
        assert encode_address(bytes.fromhex(me.public_key_hex)) == addr


def test_every_single_character_substitution_is_caught() -> None:
    addr = Identity.generate().address
    for i in range(3, len(addr)):
        for c in _CHARSET:
            if c != addr[i]:
                assert not is_valid_address(addr[:i] + c + addr[i + 1 :]), (i, c)


def test_swapped_neighbours_missing_and_extra_characters_are_caught() -> None:
    addr = Identity.generate().address
    for i in range(3, len(addr) - 1):
        if addr[i] != addr[i + 1]:
            swapped = addr[:i] + addr[i + 1] + addr[i] + addr[i + 2 :]
            assert not is_valid_address(swapped)
    with pytest.raises(AddressError, match="missing or extra"):
        parse_address(addr[:-1])
    with pytest.raises(AddressError, match="missing or extra"):
        parse_address(addr + "q")


@pytest.mark.parametrize(
    "text,message",
    [
        ("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "must start with 'tm1'"),
        ("tm1" + "b" * 58, "never in an address"),
        ("Tm1" + "q" * 58, "mixes upper and lower case"),
        ("tm1" + "q" * 58, "checksum does not match"),
    ],
)
def test_parse_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(AddressError, match=message):
        parse_address(text)


def test_address_error_is_a_value_error_with_one_line() -> None:
    with pytest.raises(ValueError) as err:
        parse_address("tm1xyz")
    assert "\n" not in str(err.value)
