"""reasoning-gym families, scored strictly.

An entry is always rebuilt here from ``(family, seed, index)``: the gold answer never travels with a
trace, so a client cannot feed the verifier its own. Scoring policy (docs/verifiers.md has the why):

* Binary reward: ``1.0`` only when the family's own scorer gives exactly ``1.0``; anything less (the
  library's partial credit for substrings, for near misses, for a well-formed wrong answer) is ``0.0``.
* Padding guard (families with a gold answer): an answer that contains the gold plus anything else is
  refused, even where the family's scorer would fish the gold out of it.
* Shape checks where the family's scorer extracts an answer from free text (numbers, grids, moves).
* Own scorers where the family's scorer is unsound (``game_of_life_halting`` gives full credit to any
  non-empty answer when the gold is ``True``).
* Families without a gold answer are scored by the library's own solution check, binary as above.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import Any

from verifier.errors import UnknownEnvironmentError

__all__ = [
    "EXCLUDED_FAMILIES",
    "NO_GOLD_FAMILIES",
    "gym_families",
    "rebuild_entry",
    "score_gym_answer",
]

#: Families registered in reasoning-gym that this verifier does not offer, and why.
EXCLUDED_FAMILIES: dict[str, str] = {
    "composite": "a mixture of other families configured per node, not a family of its own",
}

#: Families whose entries have no gold answer: the library checks the proposed solution itself.
NO_GOLD_FAMILIES = frozenset({"graph_color", "propositional_logic", "boxnet", "rubiks_cube", "rush_hour"})

_NUMBER = r"-?\d+(?:\.\d+)?"
#: Answers the family's scorer would dig out of free text must have exactly this shape.
_SHAPES: dict[str, re.Pattern[str]] = {
    "gsm_symbolic": re.compile(_NUMBER),
    "sokoban": re.compile(r"[LRUD]+"),
    "kakurasu": re.compile(r"[0-9 \t\n]+"),
    "survo": re.compile(r"[0-9 \t\n]+"),
    "fraction_simplification": re.compile(r"\$?\\?(?:d|t)?frac\{-?\d+\}\{\d+\}\$?|-?\d+\s*/\s*\d+"),
}

_lock = threading.Lock()


def _score_bool_exact(answer: str, entry: dict[str, Any]) -> float:
    return 1.0 if answer.strip().lower() == str(entry["answer"]).strip().lower() else 0.0


#: Families scored by our own function instead of the library's.
_OWN_SCORERS: dict[str, Callable[[str, dict[str, Any]], float]] = {
    "game_of_life_halting": _score_bool_exact,
}


@functools.cache
def gym_families() -> tuple[str, ...]:
    """Every reasoning-gym family this verifier offers, sorted."""
    from reasoning_gym.factory import DATASETS

    return tuple(sorted(name for name in DATASETS if name not in EXCLUDED_FAMILIES))


@functools.lru_cache(maxsize=256)
def _dataset(family: str, seed: int, size: int) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(family, seed=seed, size=size)


@functools.lru_cache(maxsize=4096)
def _entry(family: str, seed: int, index: int) -> dict[str, Any]:
    with _lock:  # some generators keep state while building an entry
        return _dataset(family, seed, index + 1)[index]


def rebuild_entry(family: str, seed: int, index: int) -> dict[str, Any]:
    """The entry ``index`` of ``family`` built with ``seed`` (``size = index + 1``), deterministically."""
    if family not in gym_families():
        raise UnknownEnvironmentError(f"unknown reasoning-gym family {family!r}")
    if not (0 <= seed < 2**63 and 0 <= index < 10**7):
        raise UnknownEnvironmentError(f"seed/index out of range for {family!r}: {seed}, {index}")
    return _entry(family, seed, index)


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def score_gym_answer(family: str, seed: int, index: int, answer: str) -> tuple[float, str]:
    """Binary score of ``answer`` for entry ``(family, seed, index)`` under the strict policy."""
    entry = rebuild_entry(family, seed, index)
    gold = entry.get("answer")
    if family not in NO_GOLD_FAMILIES and isinstance(gold, str):
        norm_answer, norm_gold = _normal(answer), _normal(gold)
        if norm_answer != norm_gold and norm_gold and norm_gold in norm_answer:
            return 0.0, "answer holds the gold answer plus other text (padding is not accepted)"
    shape = _SHAPES.get(family)
    if shape is not None and not shape.fullmatch(answer.strip()):
        return 0.0, f"answer is not in the form {family} expects"
    own = _OWN_SCORERS.get(family)
    try:
        if own is not None:
            raw = own(answer, entry)
        else:
            raw = float(_dataset(family, seed, index + 1).score_answer(answer, entry))
    except Exception as exc:  # the family's scorer choked on model output
        return 0.0, f"scorer rejected the answer ({type(exc).__name__})"
    if raw >= 1.0:
        return 1.0, "correct"
    if raw > 0.0:
        return 0.0, f"not correct (library partial credit {raw:.3g} is not paid)"
    return 0.0, "not correct"
