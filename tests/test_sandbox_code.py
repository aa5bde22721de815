"""Code tasks end to end: HumanEval's own solutions pass, wrong and hacked answers do not."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from verifier import verify
from verifier.code import extract_code, humaneval_problem, run_tests
from verifier.environments import available_families, make_task
from verifier.sandbox import describe_sandbox, run_python


def _answer(code: str) -> str:
    return f"<think>plan</think><answer>```python\n{code}\n```</answer>"


def test_every_humaneval_canonical_solution_passes() -> None:
    def run(index: int) -> tuple[int, bool, int]:
        p = humaneval_problem(index)
        result = run_tests(
            p["canonical_solution"], prompt=p["prompt"], test=p["test"], entry_point=p["entry_point"]
        )
        return index, result.passed, result.total_tests

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, range(164)))
    assert [r for r in results if not r[1]] == []
    assert all(total >= 1 for _, _, total in results)


def test_code_task_through_verify() -> None:
    assert available_families("code") == ["humaneval"]
    task = make_task("code", "humaneval", 0, 2)
    assert task.task_id == "code:humaneval:0:2" and "truncate_number" in task.prompt
    p = humaneval_problem(2)
    good = verify(task, _answer(p["prompt"] + p["canonical_solution"]))
    assert good.passed and good.score == 1.0 and good.verifier == "code-sandbox"
    partial = verify(task, _answer("def truncate_number(number):\n    return 0.5\n"))
    assert 0.0 < partial.score < 1.0 and not partial.passed and "1/3 tests passed" in partial.reason
    assert verify(task, "<think>x</think><answer>I cannot do it</answer>").score == 0.0


HACKS = {
    "always_equal": "class E(float):\n    def __eq__(self, other): return True\n    def __sub__(self, o): "
    "return 0.0\n    def __abs__(self): return 0.0\n    __hash__ = float.__hash__\n"
    "def truncate_number(number):\n    return E(7)\n",
    "patch_assert": "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
    "def truncate_number(number):\n    return 9.0\n",
    "exit_zero": "import sys\nsys.exit(0)\n",
    "os_exit_zero": "import os\nos._exit(0)\n",
    "forged_answers": "import os, json\nos.write(3, (json.dumps({'ok': '0.5'}) + '\\n').encode() * 50)\n"
    "def truncate_number(number):\n    return 9.0\n",
    "print_pass": "print('3/3 tests passed')\ndef truncate_number(number):\n    return 9.0\n",
    "not_a_value": "def truncate_number(number):\n    return object()\n",
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_reward_hacks_score_nothing(name: str) -> None:
    task = make_task("code", "humaneval", 0, 2)
    verdict = verify(task, _answer(HACKS[name]))
    # forged answers can only stand in for return values, and 0.5 is right for 1 of the 3 tests
    assert not verdict.passed and verdict.score <= 1 / 3, (name, verdict.reason)


def test_extract_code() -> None:
    assert extract_code("text\n```python\ndef f():\n    return 1\n```\nmore") == "def f():\n    return 1\n"
    assert extract_code("```\nx = 1\n```\n```py\ny = 2\n```") == "y = 2\n"
    assert extract_code("def f(): pass") == "def f(): pass"
    assert extract_code("no code at all") is None
    assert extract_code("```python\n" * 30_000) == ""  # many empty blocks: linear time, last is empty
    assert extract_code("\n" * 200_000) is None


def test_describe_sandbox_names_the_layers() -> None:
    text = describe_sandbox()
    assert text.startswith("sandbox (") and "rlimit-memory" in text and "wall-clock" in text


def test_run_python_collects_output_and_exit_status() -> None:
    result = run_python("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nsys.exit(3)")
    assert result.returncode == 3 and result.stdout == b"hello\n" and result.stderr == b"oops\n"
    assert result.stopped_by == [] and result.killed_by is None


def test_forbidden_user_namespaces_fall_back_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ubuntu's AppArmor setting makes bwrap fail to set up its namespaces: detect it, use the next
    tool, and say so. (Only bwrap's probe is made to fail; unshare's runs for real.)"""
    import verifier.sandbox as sandbox

    real_probe = sandbox._probe

    def probe(argv: list[str]) -> tuple[bool, str]:
        if argv[0] == "bwrap":
            return False, "bwrap: setting up uid map: Permission denied"
        return real_probe(argv)

    monkeypatch.setattr(sandbox, "_probe", probe)
    sandbox.sandbox_layers.cache_clear()
    try:
        layers = sandbox.sandbox_layers()
        assert layers.tool == "unshare" and "network-namespace" in layers.layers
        assert any("bwrap cannot create namespaces" in w for w in layers.warnings)
        assert "WARNING" in sandbox.describe_sandbox()
        result = sandbox.run_python("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)")
        assert result.returncode != 0 and "network-namespace" in result.stopped_by
    finally:
        sandbox.sandbox_layers.cache_clear()
