"""The wallet's exception tree. Every message is one line a user can act on; none contains a secret."""

from __future__ import annotations

__all__ = [
    "WalletError",
    "NoPassphraseError",
    "WeakPassphraseError",
    "WrongPassphraseError",
    "CorruptFileError",
    "KeystoreError",
    "KeyExistsError",
    "AddressError",
    "RecoveryPhraseError",
]


class WalletError(Exception):
    """Base of every error the wallet raises on purpose."""


class NoPassphraseError(WalletError):
    """The key must go in an encrypted file and nobody gave a passphrase."""


class WeakPassphraseError(WalletError):
    """A new passphrase is too easy to guess."""


class WrongPassphraseError(WalletError):
    """The passphrase does not open this file."""


class CorruptFileError(WalletError):
    """A key, backup or identity file is damaged or is not a Tracemill file."""


class KeystoreError(WalletError):
    """The place that holds the private key cannot be reached or does not match."""


class KeyExistsError(WalletError):
    """A restore would replace an existing key and the caller did not confirm it."""


class AddressError(WalletError, ValueError):
    """A wallet address is malformed or mistyped."""


class RecoveryPhraseError(WalletError, ValueError):
    """A recovery phrase has an unknown word, a wrong length or a failed checksum."""
