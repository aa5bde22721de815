"""Format check and answer extraction for R1-style traces.

A trace reasons inside ``<think>…</think>`` and then gives its answer inside ``<answer>…</answer>``
or ``\\boxed{…}``. The answer is taken only from the text after the reasoning, so a model cannot
scatter candidate answers through its thinking and hope one of them is picked up. The format check
is separate from correctness: a verdict reports it, the score does not depend on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FormatCheck", "after_reasoning", "check_format", "extract_answer", "extract_boxed"]

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_ANSWER_OPEN = "<answer>"
_ANSWER_CLOSE = "</answer>"
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")


@dataclass(frozen=True)
class FormatCheck:
    """Whether a completion follows the requested format, and if not, why."""

    ok: bool
    reason: str


def after_reasoning(completion: str) -> str | None:
    """The text after the last ``</think>``; the whole text if there is no think block.

    ``None`` when a ``<think>`` was opened and never closed: the reasoning did not finish, so there
    is no answer to take.
    """
    close = completion.rfind(_THINK_CLOSE)
    if close >= 0:
        return completion[close + len(_THINK_CLOSE) :]
    if _THINK_OPEN in completion:
        return None
    return completion


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{…}`` with balanced braces, or ``None``. Linear time."""
    starts = [m.end() for m in _BOXED_RE.finditer(text)]  # index just after each opening brace
    if not starts:
        return None
    closing: dict[int, int] = {}
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append(i + 1)
        elif ch == "}" and stack:
            closing[stack.pop()] = i
    for start in reversed(starts):
        if start in closing:
            return text[start : closing[start]]
    return None


def _last_answer_block(text: str) -> str | None:
    """The last complete ``<answer>…</answer>``: the last opening tag before the last closing one,
    up to the first closing tag after it. Linear time (a regex here is quadratic on hostile text)."""
    last_close = text.rfind(_ANSWER_CLOSE)
    if last_close < 0:
        return None
    open_ = text.rfind(_ANSWER_OPEN, 0, last_close)
    if open_ < 0:
        return None
    start = open_ + len(_ANSWER_OPEN)
    return text[start : text.find(_ANSWER_CLOSE, start)]


def extract_answer(completion: str) -> str | None:
    """The final answer: last ``<answer>`` block after the reasoning, else the last ``\\boxed{}``.

    Returns the stripped answer, or ``None`` when the completion holds no answer.
    """
    final = after_reasoning(completion)
    if final is None:
        return None
    answer = _last_answer_block(final)
    if answer is not None:
        return answer.strip()
    boxed = extract_boxed(final)
    return boxed.strip() if boxed is not None else None


def check_format(completion: str) -> FormatCheck:
    """R1 format: one ``<think>`` block first, then exactly one answer (tag or ``\\boxed``)."""
    stripped = completion.strip()
    if not stripped.startswith(_THINK_OPEN):
        return FormatCheck(False, "does not start with <think>")
    if stripped.count(_THINK_OPEN) != 1 or stripped.count(_THINK_CLOSE) != 1:
        return FormatCheck(False, "needs exactly one <think>…</think> block")
    final = after_reasoning(stripped) or ""
    n_open, n_close = final.count(_ANSWER_OPEN), final.count(_ANSWER_CLOSE)
    if n_open > 1 or n_close > 1:
        return FormatCheck(False, "more than one <answer> block")
    if n_open != n_close:
        return FormatCheck(False, "unbalanced <answer> tags")
    if n_open == 0 and extract_boxed(final) is None:
        return FormatCheck(False, "no <answer>…</answer> or \\boxed{} after </think>")
    return FormatCheck(True, "ok")
