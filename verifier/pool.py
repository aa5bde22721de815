"""A small pool of worker processes with a hard per-call timeout.

Used for work that can hang or blow up on hostile input (math-verify on ``\\boxed{2^{2^{30}}}``):
each call runs in a worker process with an address-space limit; a call that outlives its timeout gets
its worker killed (SIGKILL) and replaced. Workers start lazily on first use and are shut down at exit,
so importing the verifier never spawns anything and a node or CLI never hangs on exit.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["WorkerCrashed", "WorkerPool", "WorkerTimeout"]

log = logging.getLogger("tracemill.verifier.pool")

_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


class WorkerTimeout(Exception):
    """The call ran past its timeout; its worker was killed."""


class WorkerCrashed(Exception):
    """The worker died during the call (out of memory, a crash in native code)."""


def _worker_command(target: str, memory_limit: int | None) -> list[str]:
    return [sys.executable, "-m", "verifier.pool", target, str(memory_limit or 0)]


def _worker_main(target: str, memory_limit: int) -> None:
    """Body of a worker process: read pickled argument tuples on stdin, answer on stdout."""
    channel = Connection(os.dup(1))
    requests = Connection(os.dup(0))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # what libraries print (reasoning-gym prints dots) never enters the channel
    import logging

    logging.basicConfig(level=logging.ERROR)  # a worker's expected timeouts are not warnings
    if memory_limit:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        except (ImportError, ValueError, OSError):  # not on this platform
            pass
    module_name, _, fn_name = target.partition(":")
    fn = getattr(importlib.import_module(module_name), fn_name)
    channel.send(("ready", None))
    while True:
        try:
            args = requests.recv()
        except (EOFError, KeyboardInterrupt):
            return
        try:
            channel.send(("ok", fn(*args)))
        except MemoryError:
            channel.send(("error", "out of memory"))
        except Exception as exc:
            channel.send(("error", f"{type(exc).__name__}: {exc}"[:500]))


class _Worker:
    def __init__(self, target: str, memory_limit: int | None, extra_env: dict[str, str]) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, **extra_env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            _worker_command(target, memory_limit), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env, start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.send_conn = Connection(os.dup(self.proc.stdin.fileno()))
        self.conn = Connection(os.dup(self.proc.stdout.fileno()))
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.ready = False

    def send(self, args: Any) -> None:
        self.send_conn.send(args)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("worker %s did not die", self.proc.pid)
        self.conn.close()
        self.send_conn.close()


class WorkerPool:
    """Run ``module:function`` in up to ``size`` worker processes, one call per worker at a time."""

    def __init__(self, target: str, *, size: int = 2, memory_limit: int | None = None,
                 start_timeout_s: float = 60.0, env: dict[str, str] | None = None) -> None:
        self.target = target
        self.env = dict(env or {})
        self.size = max(1, size)
        self.memory_limit = memory_limit
        self.start_timeout_s = start_timeout_s
        self._idle: list[_Worker] = []
        self._count = 0
        self._closed = False
        self._cond = threading.Condition()
        _POOLS.add(self)

    def _acquire(self) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("worker pool is closed")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.size:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return _Worker(self.target, self.memory_limit, self.env)
        except BaseException:
            self._discard(None)
            raise

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            if self._closed:
                worker.kill()
            else:
                self._idle.append(worker)
            self._cond.notify()

    def _discard(self, worker: _Worker | None) -> None:
        if worker is not None:
            worker.kill()
        with self._cond:
            self._count -= 1
            self._cond.notify()

    def call(self, *args: Any, timeout_s: float) -> Any:
        """Run the target with ``args`` in a worker; the result, or WorkerTimeout/WorkerCrashed.

        An exception inside the target comes back as ``RuntimeError`` with its message.
        """
        worker = self._acquire()
        try:
            if not worker.ready:
                if not worker.conn.poll(self.start_timeout_s):
                    raise WorkerCrashed("worker did not start")
                worker.conn.recv()
                worker.ready = True
            worker.send(args)
            if not worker.conn.poll(timeout_s):
                self._discard(worker)
                raise WorkerTimeout(f"no result within {timeout_s:g} s")
            status, value = worker.conn.recv()
        except WorkerTimeout:
            raise
        except (EOFError, OSError, WorkerCrashed) as exc:
            self._discard(worker)
            raise WorkerCrashed(f"worker died (exit status {worker.proc.returncode})") from exc
        self._release(worker)
        if status == "error":
            raise RuntimeError(value)
        return value

    def warm_up(self) -> None:
        """Start every worker now (so the first real calls do not pay for imports)."""
        workers = [self._acquire() for _ in range(self.size)]
        for worker in workers:
            if not worker.ready and worker.conn.poll(self.start_timeout_s):
                worker.conn.recv()
                worker.ready = True
            self._release(worker)

    def close(self) -> None:
        """Kill every worker; later calls raise."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.kill()


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()


if __name__ == "__main__":
    _worker_main(sys.argv[1], int(sys.argv[2]))
