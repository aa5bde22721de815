"""The verifier's exception tree. Bad model output never raises: it gets a failed verdict."""

from __future__ import annotations

__all__ = ["VerifierError", "UnknownEnvironmentError"]


class VerifierError(Exception):
    """Base of every error the verifier raises on purpose."""


class UnknownEnvironmentError(VerifierError, KeyError):
    """A task names an ``env``/``family`` this verifier does not know (or cannot run here)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown environment"
