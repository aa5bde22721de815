"""Tracemill's verifiers: honest, binary rewards for reasoning-gym families, math and code.

``verify(task, completion) -> Verdict`` is the one entry point (docs/verifiers.md); tasks are built
by :func:`verifier.environments.make_task`; :func:`describe_sandbox` says which isolation layers the
code sandbox has on this machine (log it at startup). Importing this package starts no process.
"""

from verifier.dispatch import VERIFIER_VERSION, verify
from verifier.errors import UnknownEnvironmentError, VerifierError
from verifier.sandbox import describe_sandbox

__all__ = ["VERIFIER_VERSION", "UnknownEnvironmentError", "VerifierError", "describe_sandbox", "verify"]
