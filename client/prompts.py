"""Asking the person at the terminal for passphrases; headless runs use environment variables."""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["ask_new_passphrase", "key_passphrase", "on_terminal"]


def on_terminal() -> bool:
    return bool(sys.stdin and sys.stdin.isatty())


def ask_new_passphrase(what: str) -> str | None:
    """Ask for a new passphrase twice, with strength feedback; None when there is no terminal."""
    from wallet.passphrase import assess_passphrase

    if not on_terminal():
        return None
    for _ in range(3):
        first = getpass.getpass(f"New passphrase for {what}: ")
        strength = assess_passphrase(first)
        print(f"strength: {strength.label}. {' '.join(strength.feedback)}".rstrip(), file=sys.stderr)
        if not strength.acceptable:
            continue
        if getpass.getpass("Type it again: ") == first:
            return first
        print("The two passphrases differ; try again.", file=sys.stderr)
    return None


def key_passphrase(wallet_dir: Path) -> Callable[[], str | None]:
    """The key file's passphrase (used only where no OS keyring exists, and only when
    TRACEMILL_PASSPHRASE is not set): asked once to unlock, twice with feedback to create."""
    from wallet.keystore import read_info

    def ask() -> str | None:
        if read_info(wallet_dir) is None:
            return ask_new_passphrase("your wallet key file (no OS keyring is available)")
        return getpass.getpass("Passphrase for your wallet key file: ") if on_terminal() else None

    return ask
