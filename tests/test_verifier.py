"""verify(): answer extraction, the format check, dispatch, verdict fields, and `tracemill verify`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from protocol import Task, Verdict
from verifier import UnknownEnvironmentError, verify
from verifier.environments import available_families, make_task
from verifier.extract import check_format, extract_answer
from verifier.gym import stable_entry

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        ("<think>2+2</think><answer>4</answer>", "4"),
        ("<think>2+2</think> so \\boxed{4}.", "4"),
        ("<think>maybe <answer>5</answer></think><answer> 4 </answer>", "4"),
        ("<think>maybe \\boxed{5}</think> no box here", None),
        ("<think>unfinished <answer>4</answer>", None),
        ("<answer>1</answer> then <answer>4</answer>", "4"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("<think>x</think>\\boxed{a{b}c", None),
        ("no answer at all", None),
        ("<think>x</think><answer>1</answer><answer>2</answer></answer>", "2"),
        ("<think>x</think><answer>4</answer> and then <answer>unfinished", "4"),
    ],
)
def test_extract_answer_only_after_reasoning(completion: str, answer: str | None) -> None:
    assert extract_answer(completion) == answer


def test_hostile_completions_are_handled_in_linear_time() -> None:
    """A regex over 25,000 unclosed tags took 37 s here; the node must not be that easy to stall."""
    for text in ["<answer>" * 25_000, "\\boxed{" * 25_000, "{" * 200_000, "<think>" * 25_000]:
        assert extract_answer(text) is None
        assert not check_format(text).ok
    task = make_task("reasoning_gym", "basic_arithmetic", 1, 0)
    assert not verify(task, "<think>x</think>" + "<answer>" * 20_000).passed


def test_format_check_is_separate_from_answer() -> None:
    assert check_format("<think>a</think><answer>1</answer>").ok
    assert check_format("<think>a</think>\\boxed{1}").ok
    assert not check_format("<answer>1</answer>").ok
    assert not check_format("<think>a</think><answer>1</answer><answer>2</answer>").ok
    assert not check_format("<think>a</think><think>b</think><answer>1</answer>").ok
    assert extract_answer("<answer>1</answer>") == "1"  # a format failure still has an answer


def test_make_task_is_deterministic_and_carries_no_gold() -> None:
    a = make_task("reasoning_gym", "basic_arithmetic", 7, 3, group_size=8)
    b = make_task("reasoning_gym", "basic_arithmetic", 7, 3, group_size=8)
    assert a == b and a.task_id == "rg:basic_arithmetic:7:3" and a.group_size == 8
    assert "<answer>" in a.prompt and "<think>" in a.prompt
    gold = stable_entry("basic_arithmetic", 7, 3)["answer"]
    assert gold not in json.dumps(a.verifier_data)
    assert make_task("reasoning_gym", "basic_arithmetic", 7, 4).prompt != a.prompt


def test_verify_reasoning_gym_right_wrong_and_forged_gold() -> None:
    task = make_task("reasoning_gym", "basic_arithmetic", 7, 3)
    gold = stable_entry("basic_arithmetic", 7, 3)["answer"]
    good = verify(task, f"<think>work</think><answer>{gold}</answer>")
    assert isinstance(good, Verdict) and good.passed and good.score == 1.0
    assert good.verifier == "reasoning-gym-strict" and good.verifier_version.startswith("1/")
    assert good.elapsed_s >= 0
    bad = verify(task, "<think>work</think><answer>123456789</answer>")
    assert not bad.passed and bad.score == 0.0 and bad.reason
    # a client that rewrites verifier_data cannot smuggle in its own gold answer
    forged = Task.model_validate({**task.model_dump(), "verifier_data": {
        **task.verifier_data, "answer": "123456789", "gold": "123456789"}})
    assert not verify(forged, "<think>work</think><answer>123456789</answer>").passed


def test_verify_bad_output_never_raises() -> None:
    task = make_task("reasoning_gym", "prime_factorization", 1, 0)
    completions = ["", "<think>", "<think>x</think><answer></answer>", "<think>x</think><answer>zz</answer>",
                   "\x00" * 1000, "<answer>" * 500]
    for completion in completions:
        verdict = verify(task, completion)
        assert not verdict.passed and verdict.score == 0.0 and verdict.reason


def test_unknown_environment_or_family_raises() -> None:
    task = make_task("reasoning_gym", "basic_arithmetic", 1, 0)
    with pytest.raises(UnknownEnvironmentError):
        verify(task.model_copy(update={"env": "chess"}), "<answer>1</answer>")
    with pytest.raises(UnknownEnvironmentError):
        verify(task.model_copy(update={"family": "no_such_family"}), "<answer>1</answer>")
    with pytest.raises(UnknownEnvironmentError):
        verify(task.model_copy(update={"verifier_data": {}}), "<answer>1</answer>")
    with pytest.raises(UnknownEnvironmentError):
        make_task("reasoning_gym", "composite", 1, 0)
    with pytest.raises(UnknownEnvironmentError):
        available_families("chess")


def test_verify_math_uses_math_verify() -> None:
    task = make_task("math", "gsm_symbolic", 5, 3)
    assert task.task_id == "math:gsm_symbolic:5:3"
    gold = stable_entry("gsm_symbolic", 5, 3)["answer"]
    verdict = verify(task, f"<think>w</think><answer>{gold}.0</answer>")
    assert verdict.passed and verdict.verifier == "math-verify"
    assert not verify(task, f"<think>w</think><answer>{gold}1</answer>").passed


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "client", "verify", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_verdict_json(tmp_path: Path) -> None:
    task = make_task("reasoning_gym", "basic_arithmetic", 2, 1)
    gold = stable_entry("basic_arithmetic", 2, 1)["answer"]
    (tmp_path / "task.json").write_text(task.model_dump_json())
    (tmp_path / "c.txt").write_text(f"<think>w</think><answer>{gold}</answer>")
    done = _cli(str(tmp_path / "task.json"), str(tmp_path / "c.txt"))
    assert done.returncode == 0, done.stderr
    verdict = Verdict.model_validate_json(done.stdout)
    assert verdict.passed and verdict.verifier == "reasoning-gym-strict"


def test_cli_bad_file_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("<answer>1</answer>")
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "alien.json").write_text(make_task("reasoning_gym", "basic_arithmetic", 2, 1)
                                         .model_copy(update={"env": "chess"}).model_dump_json())
    for task_file in ["missing.json", "bad.json", "alien.json"]:
        done = _cli(str(tmp_path / task_file), str(tmp_path / "c.txt"))
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""
    (tmp_path / "ok.json").write_text(make_task("reasoning_gym", "basic_arithmetic", 2, 1).model_dump_json())
    done = _cli(str(tmp_path / "ok.json"), str(tmp_path / "missing.txt"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_workers_start_lazily_and_go_away_at_exit() -> None:
    """Importing the verifier starts nothing; a process that used the pool exits without hanging and
    leaves no worker behind."""
    script = (
        "import os, verifier.workers as w\n"
        "assert w._pool is None\n"
        "from verifier.mathcheck import check_math\n"
        "assert check_math('1/2', '0.5').correct\n"
        "print(' '.join(str(x.proc.pid) for x in w._pool._idle))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    pids = [int(p) for p in done.stdout.split()]
    assert pids
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
