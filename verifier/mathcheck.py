"""Math answers checked with math-verify, in worker processes with a hard timeout.

math-verify times itself out with ``signal.alarm`` (whole seconds, main thread only), and a hostile
answer such as ``\\boxed{2^{2^{30}}}`` can take seconds and hundreds of MB. So checks run in a
:class:`~verifier.pool.WorkerPool`: each worker has an address-space limit, math-verify's own timeouts
stay on inside it, and the parent kills a worker that does not answer in time. Answers longer than
:data:`MAX_ANSWER_CHARS` are refused before any parsing. Gold answers are parsed once per worker.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_ANSWER_CHARS",
    "MathResult",
    "check_math",
    "check_math_in_process",
    "check_math_task",
]

#: Whole seconds math-verify may spend parsing, and again comparing (signal.alarm has no fractions).
DEFAULT_TIMEOUT_S = 3
#: Longer answers are refused unparsed: no honest final answer to a task is this long.
MAX_ANSWER_CHARS = 1000


@dataclass(frozen=True)
class MathResult:
    correct: bool
    reason: str


def _as_latex(text: str) -> str:
    text = text.strip().replace("\\$", "")  # an escaped dollar is a currency sign, not math mode
    if "$" in text or "\\boxed" in text or "\\(" in text or "\\[" in text:
        return text
    return f"${text}$"


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str, timeout_s: int) -> Any:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    return parse(_as_latex(gold), [LatexExtractionConfig(), ExprExtractionConfig()],
                 parsing_timeout=timeout_s)


def check_math_in_process(gold: str, answer: str, timeout_s: int = DEFAULT_TIMEOUT_S) -> tuple[bool, str]:
    """math-verify on one pair in this process (main thread only). The worker pool calls this."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    parsed_gold = _parse_gold(gold, timeout_s)
    if not parsed_gold:
        return False, "gold answer could not be parsed"
    parsed = parse(_as_latex(answer), [LatexExtractionConfig(), ExprExtractionConfig()],
                   parsing_timeout=timeout_s)
    if not parsed:
        return False, "answer could not be parsed as math"
    if verify(parsed_gold, parsed, timeout_seconds=timeout_s):
        return True, "correct"
    return False, "not equal to the gold answer"


def check_math_task(family: str, seed: int, index: int, answer: str, *,
                    timeout_s: int = DEFAULT_TIMEOUT_S) -> MathResult:
    """Check ``answer`` against the gold of reasoning-gym entry ``(family, seed, index)``."""
    timeout_s = max(1, int(timeout_s))
    if len(answer) > MAX_ANSWER_CHARS:
        return MathResult(False, f"answer longer than {MAX_ANSWER_CHARS} characters")
    from verifier.workers import run_in_worker

    ok, reason = run_in_worker("math_task", family, seed, index, answer, timeout_s,
                               timeout_s=2 * timeout_s + 10)  # + building the entry in a cold worker
    return MathResult(bool(ok), str(reason))


def check_math(gold: str, answer: str, *, timeout_s: int = DEFAULT_TIMEOUT_S) -> MathResult:
    """Is ``answer`` mathematically equal to ``gold``? Never raises for bad answers."""
    timeout_s = max(1, int(timeout_s))
    if len(answer) > MAX_ANSWER_CHARS:
        return MathResult(False, f"answer longer than {MAX_ANSWER_CHARS} characters")
    if not answer.strip():
        return MathResult(False, "empty answer")
    from verifier.workers import run_in_worker

    # parsing and comparing each get timeout_s; one more second for the round trip
    ok, reason = run_in_worker("math", gold, answer, timeout_s, timeout_s=2 * timeout_s + 1)
    return MathResult(bool(ok), str(reason))
