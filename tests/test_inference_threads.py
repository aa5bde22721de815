"""The engine decodes with the cores other programs leave free (inference.threads).

Real busy processes and the kernel's real CPU accounting; a synthetic /proc/stat only for the arithmetic.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.engine import Engine
from inference.threads import ThreadAdvisor

CORES = os.cpu_count() or 1
linux_only = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs the kernel's /proc/stat")


def _spinners(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture
def busy_cores() -> Iterator[list[subprocess.Popen[bytes]]]:
    """One spinning process per core of the machine, killed after the test."""
    procs = _spinners(CORES)
    yield procs
    _stop(procs)


def _wait_for(advisor: ThreadAdvisor, want: int, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    got = advisor.threads()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = advisor.threads()
    return got


@linux_only
@pytest.mark.skipif(CORES < 2, reason="one core leaves nothing to take away")
def test_busy_programs_take_threads_away_and_idle_gives_them_back() -> None:
    advisor = ThreadAdvisor(CORES, interval=0.5)
    time.sleep(0.6)
    before = advisor.threads()  # what the machine leaves us before the test adds load
    if before < 2:
        pytest.skip(f"other programs already keep {advisor.others_busy:.1f} cores busy")
    procs = _spinners(CORES)
    try:
        assert _wait_for(advisor, 1) == 1
        assert advisor.others_busy > CORES - 0.75
    finally:
        _stop(procs)
    assert _wait_for(advisor, before) == before


def test_the_estimate_subtracts_what_others_use(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    now = [100.0]
    stat.write_text("cpu  1000 0 0 50000 0 0 0 0 0 0\ncpu0 ...\n")
    advisor = ThreadAdvisor(4, cores=4, interval=1.0, stat_path=stat, clock=lambda: now[0])
    assert advisor.threads() == 4  # no interval has passed yet
    # One second later others kept 1.5 cores busy (user + system + steal), 2.5 idle.
    stat.write_text(f"cpu  {1000 + tick} 0 {tick // 4} {50000 + 5 * tick // 2} 0 0 0 {tick // 4} 0 0\n")
    now[0] += 1.0
    assert advisor.threads() == 2  # 4 - 1.5 = 2.5 free cores: two whole ones
    assert 1.3 < advisor.others_busy <= 1.5  # less this test's own CPU time over the second
    idle = 50000 + 5 * tick // 2 + 4 * tick
    stat.write_text(f"cpu  {1000 + tick} 0 {tick // 4} {idle} 0 0 0 {tick // 4} 0 0\n")
    now[0] += 1.0
    assert advisor.threads() == 4  # an idle second gives them back


@pytest.mark.parametrize("content", [None, "", "intr 1 2 3\n", "cpu  a b c d\n"])
def test_an_unreadable_cpu_account_keeps_the_maximum(tmp_path: Path, content: str | None) -> None:
    stat = tmp_path / "stat"
    if content is not None:
        stat.write_text(content)
    now = [0.0]
    advisor = ThreadAdvisor(3, cores=3, interval=0.1, stat_path=stat, clock=lambda: now[0])
    for _ in range(3):
        now[0] += 1.0
        assert advisor.threads() == 3


@linux_only
@pytest.mark.skipif(CORES < 2, reason="one core leaves nothing to take away")
def test_the_engine_decodes_with_one_thread_while_every_core_is_busy(
    default_model_path: Path, busy_cores: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRACEMILL_THREADS", raising=False)
    with Engine(default_model_path, n_ctx=256, max_group=2) as e:
        assert e.n_threads >= 2
        assert e._threads is not None
        e._threads.interval = 0.5  # the engine re-checks every 2 s; the test need not wait that long
        assert _wait_for(e._threads, 1) == 1
        r = e.generate_group([{"role": "user", "content": "Hi"}], 2, seed=1, temperature=0.8, max_tokens=4)
        assert r.completion_tokens > 0 and e.threads_in_use == 1
    with Engine(default_model_path, n_ctx=256, max_group=2, n_threads=2) as fixed:
        fixed.generate_group([{"role": "user", "content": "Hi"}], 2, seed=1, temperature=0.8, max_tokens=2)
        assert fixed.threads_in_use == 2  # an explicit count is kept
