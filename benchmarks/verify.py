"""Verifier throughput: math checks with the worker pool vs in-process, sandboxed runs vs plain ones.

    python benchmarks/verify.py [--rounds N]

Prints medians (per check / per run) and the ratios. Numbers depend on the machine; the point is the
price of the isolation: worker round trips for math, namespaces + launcher + rlimits for code.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verifier.code import humaneval_problem, run_tests  # noqa: E402
from verifier.mathcheck import check_math, check_math_in_process  # noqa: E402
from verifier.sandbox import describe_sandbox, run_python  # noqa: E402
from verifier.workers import verifier_pool  # noqa: E402

MATH_PAIRS = [
    ("\\frac{1}{2}", "0.5"), ("61", "61"), ("x^2+2x+1", "(x+1)^2"), ("\\sqrt{8}", "2\\sqrt{2}"),
    ("(1, 2]", "(1,2]"), ("3", "4"), ("\\{1,2,3\\}", "\\{3,2,1\\}"), ("2\\pi", "6.28"),
]
SCRIPT = "def f(xs):\n    return sorted(xs)\nassert f([3, 1, 2]) == [1, 2, 3]\nprint('ok')\n"


def _timed(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def bench_math(rounds: int) -> None:
    pairs = MATH_PAIRS * rounds
    for gold, answer in MATH_PAIRS:  # warm both paths: imports, parsed golds
        check_math_in_process(gold, answer)
    pool = verifier_pool()
    pool.warm_up()
    with ThreadPoolExecutor(pool.size) as ex:  # every worker imports sympy and parses each gold once
        list(ex.map(lambda p: check_math(*p), MATH_PAIRS * pool.size * 2))

    in_proc = _timed(lambda: [check_math_in_process(g, a) for g, a in MATH_PAIRS], rounds)
    pooled = _timed(lambda: [check_math(g, a) for g, a in MATH_PAIRS], rounds)
    workers = verifier_pool().size
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(lambda p: check_math(*p), pairs))
    parallel_rate = len(pairs) / (time.perf_counter() - started)

    per_in = statistics.median(in_proc) / len(MATH_PAIRS)
    per_pool = statistics.median(pooled) / len(MATH_PAIRS)
    print(f"math  in-process      median {per_in * 1e3:7.2f} ms/check  {1 / per_in:8.1f} checks/s")
    print(f"math  pool, 1 caller  median {per_pool * 1e3:7.2f} ms/check  {1 / per_pool:8.1f} checks/s"
          f"  (x{per_pool / per_in:.2f} the in-process time)")
    print(f"math  pool, {workers} callers ({workers} workers)            {parallel_rate:8.1f} checks/s"
          f"  (x{parallel_rate * per_in:.2f} the in-process rate)")


def bench_sandbox(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "main.py")
        script.write_text(SCRIPT)
        plain = _timed(lambda: subprocess.run([sys.executable, "-I", "-S", str(script)], capture_output=True,
                                              check=True, env={}), rounds)
    boxed = _timed(lambda: run_python(SCRIPT), rounds)
    p = humaneval_problem(0)
    tests = _timed(lambda: run_tests(p["canonical_solution"], prompt=p["prompt"], test=p["test"],
                                     entry_point=p["entry_point"]), rounds)
    mp, mb, mt = statistics.median(plain), statistics.median(boxed), statistics.median(tests)
    print(f"code  plain subprocess median {mp * 1e3:7.1f} ms/run  {1 / mp:6.1f} runs/s")
    print(f"code  sandboxed run    median {mb * 1e3:7.1f} ms/run  {1 / mb:6.1f} runs/s  (x{mb / mp:.2f})")
    print(f"code  HumanEval/0 tests through the harness median {mt * 1e3:7.1f} ms  {1 / mt:6.1f} runs/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(describe_sandbox())
    print(f"{os.cpu_count()} CPUs, {args.rounds} rounds")
    bench_math(args.rounds)
    bench_sandbox(args.rounds)


if __name__ == "__main__":
    main()
