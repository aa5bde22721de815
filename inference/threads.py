"""How many decode threads the CPU can spare right now.

llama.cpp's CPU threads meet at a barrier after every operation of the graph, spinning while they wait.
When another program keeps a core busy, one of our threads is descheduled now and then and all the others
spin until it comes back: on this 2-core machine, with one other busy process, 2 threads decode 20.8
tokens/s where 1 thread decodes 46.4 (idle, 2 threads give 75.3). So the engine asks this advisor before a
decode and uses only the cores other programs leave free.

The estimate comes from the kernel's CPU accounting (``/proc/stat``) minus this process's own CPU time,
over the last ``interval`` seconds. Where that is not readable (macOS, Windows) the advisor keeps the
maximum: those schedulers are not worse than this, and ``TRACEMILL_THREADS`` still sets a fixed count.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["ThreadAdvisor"]

log = logging.getLogger(__name__)
_PROC_STAT = Path("/proc/stat")
# A core counts as free when other programs use it at most a quarter of the time: one they use 30% of
# the time is not free enough for a spinning barrier.
_SPARE = 0.25


class ThreadAdvisor:
    """``threads()`` -> how many of ``max_threads`` to decode with, re-estimated at most every
    ``interval`` seconds (in between, the last answer is returned at the cost of one clock read)."""

    def __init__(
        self,
        max_threads: int,
        *,
        cores: int | None = None,
        interval: float = 2.0,
        stat_path: Path = _PROC_STAT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_threads = max(1, max_threads)
        self.cores = cores or os.cpu_count() or 1  # /proc/stat counts every core of the machine
        self.interval = interval
        self._stat_path = stat_path
        self._clock = clock
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._current = self.max_threads
        self.others_busy = 0.0  # cores other programs kept busy over the last interval
        self._last = self._sample()

    def threads(self) -> int:
        now = self._clock()
        if self._last is None or now - self._last[0] < self.interval:
            return self._current
        sample = self._sample()
        if sample is None:
            return self._current
        t0, busy0, own0 = self._last
        t1, busy1, own1 = sample
        self._last = sample
        others = max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))
        self.others_busy = others
        free = self.cores - others
        advised = max(1, min(self.max_threads, math.floor(free + _SPARE)))
        if advised != self._current:
            log.info(
                "decoding with %d of %d threads: other programs keep %.1f of %d cores busy",
                advised,
                self.max_threads,
                others,
                self.cores,
            )
            self._current = advised
        return advised

    def _sample(self) -> tuple[float, float, float] | None:
        """(clock, CPU-seconds all programs spent busy, CPU-seconds this process spent), or None."""
        try:
            first = self._stat_path.read_text().split("\n", 1)[0].split()
            if first[0] != "cpu" or len(first) < 5:
                return None
            fields = [int(x) for x in first[1:]]
        except (OSError, ValueError, IndexError):
            return None
        # user nice system idle iowait irq softirq steal ...: busy is everything but idle and iowait.
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        busy = (sum(fields[:8]) - idle) / self._tick
        t = os.times()
        return self._clock(), busy, t.user + t.system
