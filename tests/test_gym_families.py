"""Every reasoning-gym family the node offers: its gold (or a valid solution) scores 1, a wrong answer
0, and a padded gold (or padded solution) less than 1. One entry per family, built offline."""

from __future__ import annotations

import copy
import json
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from verifier import verify
from verifier.environments import available_families, make_task
from verifier.gym import EXCLUDED_FAMILIES, NO_GOLD_FAMILIES, stable_entry

SEED = 11


def _rush_hour_solution(entry: dict[str, Any]) -> str:
    """Breadth-first search over single steps with the library's own Board (trusted test helper)."""
    from reasoning_gym.games.rush_hour import Board

    start = Board(entry["metadata"]["board_config"])
    letters = [chr(ord("A") + i) for i, p in enumerate(start._pieces) if not p.fixed]
    seen = {str(start)}
    todo: deque[tuple[Board, list[str]]] = deque([(start, [])])
    while todo:
        board, path = todo.popleft()
        if board.solved:
            return " ".join(path)
        for letter in letters:
            for step in (1, -1):
                nxt = copy.deepcopy(board)
                nxt.move(letter, step)
                key = str(nxt)
                if key not in seen:
                    seen.add(key)
                    todo.append((nxt, [*path, f"{letter}{'+' if step > 0 else '-'}1"]))
    raise AssertionError("unsolvable rush hour board")


def _boxnet_solution(entry: dict[str, Any]) -> str:
    """Walk each box to a target of its colour, one step per plan (rows first, then columns)."""
    state = entry["metadata"]["initial_state"]
    boxes: dict[str, list[tuple[float, float]]] = {}
    targets: dict[str, list[tuple[float, float]]] = {}
    for key, items in state.items():
        pos = tuple(float(v) for v in key.split("_"))
        for item in items:
            kind, colour = item.split("_", 1)
            (boxes if kind == "box" else targets).setdefault(colour, []).append(pos)  # type: ignore[arg-type]
    plans: list[dict[str, str]] = []
    for colour, positions in boxes.items():
        for (r, c), (tr, tc) in zip(positions, targets[colour], strict=True):
            while (r, c) != (tr, tc):
                nr, nc = (r + (1 if tr > r else -1), c) if r != tr else (r, c + (1 if tc > c else -1))
                plans.append({f"Agent[{r}, {c}]": f"move(box_{colour}, square[{nr}, {nc}])"})
                r, c = nr, nc
            plans.append({f"Agent[{r}, {c}]": f"move(box_{colour}, target_{colour})"})
    return json.dumps(plans)


def _valid_solution(family: str, entry: dict[str, Any]) -> str:
    meta = entry["metadata"]
    if family == "graph_color":
        return json.dumps({str(k): v for k, v in eval(str(meta["possible_answer"])).items()})
    if family == "propositional_logic":
        return str(meta["example_answer"])
    if family == "rubiks_cube":
        return str(meta["example_correct_answer"])
    if family == "rush_hour":
        return _rush_hour_solution(entry)
    if family == "boxnet":
        return _boxnet_solution(entry)
    return str(entry["answer"])


def _completion(answer: str) -> str:
    return f"<think>working it out</think><answer>{answer}</answer>"


def test_excluded_families_are_documented() -> None:
    from reasoning_gym.factory import DATASETS

    offered = set(available_families())
    assert offered | set(EXCLUDED_FAMILIES) == set(DATASETS)
    assert offered >= NO_GOLD_FAMILIES
    assert len(offered) >= 100


@pytest.mark.parametrize("family", available_families())
def test_family_scores_strictly(family: str) -> None:
    task = make_task("reasoning_gym", family, SEED, 0)
    entry = stable_entry(family, SEED, 0)
    solution = _valid_solution(family, entry)

    good = verify(task, _completion(solution))
    assert good.score == 1.0 and good.passed, (family, solution[:200], good.reason)

    wrong = verify(task, _completion("zzq 987654321 not it"))
    assert wrong.score == 0.0 and not wrong.passed, family

    if family == "boxnet":  # the question asks for a ```json block: a fence around the answer is fine
        assert verify(task, _completion(f"```json\n{solution}\n```")).passed

    for padded in (f"The answer is {solution} (I am fairly sure)", f"{solution}\n{solution}",
                   f"{solution} or maybe 42"):
        verdict = verify(task, _completion(padded))
        assert verdict.score < 1.0 and not verdict.passed, (family, padded[:200], verdict.reason)


def test_tasks_are_identical_across_processes_and_hash_seeds() -> None:
    """The node and a client build the same task even for families that iterate over sets."""
    import subprocess
    import sys

    script = ("import json; from verifier.environments import make_task; print(json.dumps([make_task("
              "'reasoning_gym', f, 11, 2).prompt for f in ['isomorphic_strings', 'knight_swap', "
              "'polynomial_multiplication', 'ransom_note']]))")
    outputs = set()
    for hash_seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              cwd=Path(__file__).resolve().parent.parent,
                              env={"PYTHONHASHSEED": hash_seed, "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.add(done.stdout.strip().splitlines()[-1])
    assert len(outputs) == 1
