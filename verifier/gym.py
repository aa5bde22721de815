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
import os
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
    "score_gym_in_process",
    "stable_entry",
]

#: Families registered in reasoning-gym that this verifier does not offer, and why.
EXCLUDED_FAMILIES: dict[str, str] = {
    "composite": "a mixture of other families configured per node, not a family of its own",
}

#: Families whose entries have no gold answer: the library checks the proposed solution itself.
NO_GOLD_FAMILIES = frozenset({"graph_color", "propositional_logic", "boxnet", "rubiks_cube", "rush_hour"})

#: Longest answer scored at all, and most moves in a move-list answer.
MAX_ANSWER_CHARS = 20_000
MAX_MOVES = 2_000
#: Building one entry in a cold worker (imports included) takes a few seconds at most.
ENTRY_TIMEOUT_S = 120.0

_NUMBER = r"-?\d+(?:\.\d+)?"
#: Answers the family's scorer would dig out of free text must have exactly this shape.
_SHAPES: dict[str, re.Pattern[str]] = {
    "gsm_symbolic": re.compile(_NUMBER),
    "sokoban": re.compile(r"[LRUD]+"),
    "rubiks_cube": re.compile(r"[A-Za-z]{1,2}'?\d?(?:\s+[A-Za-z]{1,2}'?\d?)*"),
    "rush_hour": re.compile(r"[A-Z][+-]\d+(?:[ ,\t\n]+[A-Z][+-]\d+)*"),
    "kakurasu": re.compile(r"[0-9 \t\n]+"),
    "survo": re.compile(r"[0-9 \t\n]+"),
    "fraction_simplification": re.compile(r"\$?\\?(?:d|t)?frac\{-?\d+\}\{\d+\}\$?|-?\d+\s*/\s*\d+"),
}

_lock = threading.Lock()


def _score_bool_exact(answer: str, entry: dict[str, Any]) -> float:
    return 1.0 if answer.strip().lower() == str(entry["answer"]).strip().lower() else 0.0


def _score_rush_hour(answer: str, entry: dict[str, Any]) -> float:
    """Every move must be legal and fully made, and the puzzle solved by the last one, not before."""
    from reasoning_gym.games.rush_hour import Board

    board = Board(entry["metadata"]["board_config"])
    moves = re.findall(r"([A-Z])([+-])(\d+)", answer)
    if not moves or len(moves) > MAX_MOVES:
        return 0.0
    for letter, sign, number in moves:
        index, steps = ord(letter) - ord("A"), int(number)
        if board.solved or index >= len(board._pieces) or board._pieces[index].fixed or steps > 6:
            return 0.0
        piece = board._pieces[index]
        before = piece.position
        board.move(letter, steps if sign == "+" else -steps)
        if abs(piece.position - before) != steps * piece.stride:
            return 0.0  # blocked: the library would silently make part of the move
    return 1.0 if board.solved else 0.0


#: Families scored by our own function instead of the library's.
_OWN_SCORERS: dict[str, Callable[[str, dict[str, Any]], float]] = {
    "game_of_life_halting": _score_bool_exact,
    "rush_hour": _score_rush_hour,
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
    """The entry ``index`` of ``family`` built with ``seed`` (``size = index + 1``) in this process.

    Deterministic only where ``PYTHONHASHSEED=0``: some families (isomorphic_strings, knight_swap,
    polynomial_multiplication, ransom_note) iterate over sets while generating. Use
    :func:`stable_entry` anywhere else.
    """
    if family not in gym_families():
        raise UnknownEnvironmentError(f"unknown reasoning-gym family {family!r}")
    if not (0 <= seed < 2**63 and 0 <= index < 10**7):
        raise UnknownEnvironmentError(f"seed/index out of range for {family!r}: {seed}, {index}")
    return _entry(family, seed, index)


def stable_entry(family: str, seed: int, index: int) -> dict[str, Any]:
    """The entry as every node and client builds it: in a worker with ``PYTHONHASHSEED=0``."""
    if os.environ.get("PYTHONHASHSEED") == "0":
        return rebuild_entry(family, seed, index)
    if family not in gym_families():
        raise UnknownEnvironmentError(f"unknown reasoning-gym family {family!r}")
    from verifier.workers import call_in_worker

    entry: dict[str, Any] = call_in_worker("entry", family, seed, index, timeout_s=ENTRY_TIMEOUT_S)
    return entry


def _unfence(answer: str) -> str:
    """An answer wrapped whole in one code fence (```json … ```) is the text inside it."""
    text = answer.strip()
    if text.startswith("```") and text.endswith("```") and text.count("```") == 2 and len(text) > 6:
        inner = text[3:-3]
        first, newline, rest = inner.partition("\n")
        return (rest if newline and re.fullmatch(r"[A-Za-z0-9_+-]{0,20}", first.strip()) else inner).strip()
    return answer


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def score_gym_answer(family: str, seed: int, index: int, answer: str, *,
                     timeout_s: float = 20.0) -> tuple[float, str]:
    """Binary score of ``answer`` for entry ``(family, seed, index)`` under the strict policy.

    Runs in a worker process with a hard timeout: some families' scorers take minutes or gigabytes
    on hostile answers (rubiks_cube expands ``U999999999`` into a billion moves).
    """
    if family not in gym_families():
        raise UnknownEnvironmentError(f"unknown reasoning-gym family {family!r}")
    if len(answer) > MAX_ANSWER_CHARS:
        return 0.0, f"answer longer than {MAX_ANSWER_CHARS} characters"
    from verifier.workers import run_in_worker

    return run_in_worker("gym", family, seed, index, answer, timeout_s=timeout_s)


def score_gym_in_process(family: str, seed: int, index: int, answer: str) -> tuple[float, str]:
    """The strict scoring itself, in this process (the worker pool calls this)."""
    entry = rebuild_entry(family, seed, index)
    answer = _unfence(answer)
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
