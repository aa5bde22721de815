"""Passphrases: where one comes from, and how strong a new one is (feedback a user can act on)."""

from __future__ import annotations

import math
import os
import string
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from wallet.errors import NoPassphraseError, WeakPassphraseError

__all__ = [
    "PASSPHRASE_ENV",
    "MIN_PASSPHRASE_LEN",
    "MIN_SCORE",
    "PassphraseStrength",
    "assess_passphrase",
    "require_strong",
    "normalize",
    "obtain_passphrase",
]

#: Environment variable a headless rig (or a test) sets instead of typing a passphrase.
PASSPHRASE_ENV = "TRACEMILL_PASSPHRASE"
MIN_PASSPHRASE_LEN = 8
#: A new passphrase must score at least this (0 very weak … 4 strong).
MIN_SCORE = 2

_COMMON = {
    "password", "passw0rd", "password1", "password123", "123456", "12345678", "123456789", "1234567890",
    "qwerty", "qwertyuiop", "letmein", "iloveyou", "admin", "welcome", "monkey", "dragon", "football",
    "baseball", "abc123", "trustno1", "sunshine", "princess", "master", "shadow", "superman", "tracemill",
    "changeme", "secret", "passphrase", "qwerty123", "111111", "000000", "asdfghjkl", "zaq12wsx",
}
_LABELS = ("very weak", "weak", "fair", "good", "strong")


@dataclass(frozen=True)
class PassphraseStrength:
    score: int  # 0..4
    bits: float  # a rough entropy estimate
    feedback: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return _LABELS[self.score]

    @property
    def acceptable(self) -> bool:
        return self.score >= MIN_SCORE


def normalize(passphrase: str) -> bytes:
    """NFKC-normalized UTF-8, so the same passphrase typed on another OS gives the same bytes."""
    return unicodedata.normalize("NFKC", passphrase).encode("utf-8")


def _pool(p: str) -> int:
    pool = 0
    if any(c in string.ascii_lowercase for c in p):
        pool += 26
    if any(c in string.ascii_uppercase for c in p):
        pool += 26
    if any(c in string.digits for c in p):
        pool += 10
    if any(c in string.punctuation or c == " " for c in p):
        pool += 33
    if any(ord(c) > 127 for c in p):
        pool += 100
    return max(pool, 1)


def _effective_len(p: str) -> float:
    """Length with runs, repeats and keyboard/alphabet sequences counted at a fraction."""
    eff, prev = 0.0, None
    for c in p:
        if prev is not None and (c == prev or abs(ord(c) - ord(prev)) == 1):
            eff += 0.25
        else:
            eff += 1.0
        prev = c
    distinct = len(set(p))
    return min(eff, distinct * 2.0)


def assess_passphrase(passphrase: str) -> PassphraseStrength:
    """Rough strength of a new passphrase, with advice. Never logs or keeps the passphrase."""
    p = passphrase
    feedback: list[str] = []
    lowered = p.lower().strip()
    stripped = lowered.rstrip(string.digits + string.punctuation)
    if lowered in _COMMON or stripped in _COMMON:
        return PassphraseStrength(0, 0.0, ["This is one of the most common passwords; choose another."])
    bits = _effective_len(p) * math.log2(_pool(p))
    if len(p) < MIN_PASSPHRASE_LEN:
        feedback.append(f"Use at least {MIN_PASSPHRASE_LEN} characters; four or more random words work well.")
    if len(set(p)) <= 3:
        feedback.append("Avoid repeating the same few characters.")
    if _pool(p) <= 26 and len(p) < 16:
        feedback.append("Make it longer, or mix in capitals, digits or symbols.")
    score = 0 if bits < 28 else 1 if bits < 36 else 2 if bits < 60 else 3 if bits < 80 else 4
    if len(p) < MIN_PASSPHRASE_LEN:
        score = min(score, 1)
    if score < 3 and not feedback:
        feedback.append("A longer passphrase (several unrelated words) would be stronger.")
    return PassphraseStrength(score, round(bits, 1), feedback)


def require_strong(passphrase: str) -> None:
    """Raise WeakPassphraseError (with the advice) when a new passphrase is too weak to protect a key."""
    strength = assess_passphrase(passphrase)
    if not strength.acceptable:
        advice = " ".join(strength.feedback)
        raise WeakPassphraseError(f"Passphrase is {strength.label}: {advice}")


def obtain_passphrase(source: Callable[[], str | None] | None, *, purpose: str) -> str:
    """A passphrase from ``$TRACEMILL_PASSPHRASE`` if set, else from ``source``; else NoPassphraseError.

    The environment wins so that a headless rig never blocks on a prompt.
    """
    env = os.environ.get(PASSPHRASE_ENV)
    if env:
        return env
    if source is not None:
        value = source()
        if value:
            return value
    raise NoPassphraseError(
        f"A passphrase is needed to {purpose}: run `tracemill` in a terminal to type it, "
        f"or set {PASSPHRASE_ENV} for headless use."
    )
