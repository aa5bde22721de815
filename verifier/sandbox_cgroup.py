"""A pids cgroup per sandboxed run, for root without an unprivileged uid to drop to.

RLIMIT_NPROC is not enforced for root. Where the sandbox cannot drop to a per-run uid (no bubblewrap,
and an interpreter under a private home such as /root), a pids cgroup caps the number of processes
instead, and lets the sandbox find and kill every process of the run afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from pathlib import Path

__all__ = ["PidsCgroup", "pids_cgroup_root"]

_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")  # cgroup v1, then v2
_counter = itertools.count()


def _make(root: Path, limit: int) -> Path:
    path = root / f"tracemill-{os.getpid()}-{next(_counter)}"
    path.mkdir()
    try:
        (path / "pids.max").write_text(str(limit))
    except OSError:
        path.rmdir()
        raise
    return path


@functools.cache
def pids_cgroup_root() -> Path | None:
    """A cgroup folder where this process may create pids-limited children, or ``None``."""
    if os.name != "posix" or os.geteuid() != 0:
        return None
    for candidate in map(Path, _ROOTS):
        try:
            probe = _make(candidate, 1)
        except OSError:
            continue
        probe.rmdir()
        return candidate
    return None


class PidsCgroup:
    """One run's cgroup: at most ``limit`` processes; :meth:`kill_all` then :meth:`remove` at the end."""

    def __init__(self, limit: int) -> None:
        root = pids_cgroup_root()
        if root is None:
            raise OSError("no pids cgroup available")
        self.path = _make(root, limit)
        self.procs_file = str(self.path / "cgroup.procs")

    def pids(self) -> list[int]:
        try:
            return [int(line) for line in Path(self.procs_file).read_text().split()]
        except OSError:
            return []

    def kill_all(self) -> int:
        killed = 0
        for _ in range(50):  # a fork bomb may fork while we sweep; the cap keeps it finite
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.01)
        return killed

    def remove(self) -> None:
        self.kill_all()
        for _ in range(100):  # rmdir fails while dying processes are still being reaped
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.02)
