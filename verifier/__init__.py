"""Tracemill's verifiers: honest, binary rewards for reasoning-gym families, math and code.

``verify(task, completion) -> Verdict`` is the one entry point (docs/verifiers.md); tasks are built
by :func:`verifier.environments.make_task`.
"""

from verifier.dispatch import VERIFIER_VERSION, verify
from verifier.errors import UnknownEnvironmentError, VerifierError

__all__ = ["VERIFIER_VERSION", "UnknownEnvironmentError", "VerifierError", "verify"]
