"""The verifier's worker processes: checks that may hang or eat memory on hostile answers.

One lazily started :class:`~verifier.pool.WorkerPool` serves math-verify checks and reasoning-gym
scoring. A timed-out or crashed check becomes a failed result with a reason, never an exception.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from verifier.pool import WorkerCrashed, WorkerPool, WorkerTimeout

__all__ = ["WORKER_MEMORY_BYTES", "call_in_worker", "dispatch", "run_in_worker", "verifier_pool"]

#: Address-space limit of a worker (sympy, numpy and reasoning-gym need about 1 GB of it).
WORKER_MEMORY_BYTES = 3 * 1024**3

_lock = threading.Lock()
_pool: WorkerPool | None = None


def dispatch(kind: str, *args: Any) -> Any:
    """Worker side: run one check of ``kind`` ("math" or "gym")."""
    if kind == "math":
        from verifier.mathcheck import check_math_in_process

        return check_math_in_process(*args)
    if kind == "math_task":
        from verifier.gym import rebuild_entry
        from verifier.mathcheck import check_math_in_process

        family, seed, index, answer, timeout_s = args
        return check_math_in_process(str(rebuild_entry(family, seed, index)["answer"]), answer, timeout_s)
    if kind == "gym":
        from verifier.gym import score_gym_in_process

        return score_gym_in_process(*args)
    if kind == "entry":
        from verifier.gym import rebuild_entry

        return rebuild_entry(*args)
    raise ValueError(f"unknown check kind {kind!r}")


def verifier_pool() -> WorkerPool:
    """The process-wide pool (``TRACEMILL_VERIFY_WORKERS`` sets its size; default min(2, CPUs))."""
    global _pool
    with _lock:
        if _pool is None:
            size = int(os.environ.get("TRACEMILL_VERIFY_WORKERS", "0")) or min(2, os.cpu_count() or 1)
            # a fixed hash seed: some families' entries depend on set order (see verifier/gym.py)
            _pool = WorkerPool("verifier.workers:dispatch", size=size, memory_limit=WORKER_MEMORY_BYTES,
                               env={"PYTHONHASHSEED": "0"})
        return _pool


def call_in_worker(kind: str, *args: Any, timeout_s: float) -> Any:
    """``dispatch(kind, *args)`` in a worker; raises WorkerTimeout, WorkerCrashed or RuntimeError."""
    return verifier_pool().call(kind, *args, timeout_s=timeout_s)


def run_in_worker(kind: str, *args: Any, timeout_s: float) -> tuple[Any, str]:
    """``dispatch(kind, *args)`` in a worker; on timeout or crash, ``(0.0, reason)``-style failure."""
    try:
        return tuple(verifier_pool().call(kind, *args, timeout_s=timeout_s))  # type: ignore[return-value]
    except WorkerTimeout:
        return 0.0, f"{kind} check timed out after {timeout_s:g} s (worker killed)"
    except WorkerCrashed as exc:
        return 0.0, f"{kind} check crashed: {exc}"
    except RuntimeError as exc:
        return 0.0, f"{kind} check failed: {exc}"
