"""Run untrusted Python (model-written code) in layers of isolation.

Every run, on every platform: its own session and process group, an empty environment, isolated
Python (``-I -S``: no site-packages, no user paths), a fresh temporary working folder, rlimits on CPU
time, memory, file size, open files and processes set by a small trusted launcher
(``verifier/sandbox_launcher.py``), capped stdout and stderr, and a hard wall-clock kill of the whole
group. Where the platform allows, more layers on top:

* Linux: bubblewrap (or ``unshare``) namespaces: no network (not even loopback), a private pid space
  (a setsid child dies with the sandbox), private /tmp, a read-only system with host paths hidden.
  When running as root, the launcher drops to a per-run unprivileged uid so ``RLIMIT_NPROC`` is
  enforced (it is not for root). Namespaces forbidden (Ubuntu's AppArmor restriction on user
  namespaces) are detected, and the sandbox falls back with a warning.
* macOS: ``sandbox-exec`` with a profile that denies the network and writes outside the work folder.
* Windows: no rlimits; a job object (``verifier/sandbox_windows.py``) limits memory, processes and
  CPU time and kills everything in it on close.

:func:`describe_sandbox` says which layers are active; the app logs it at startup.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from verifier.sandbox_cgroup import PidsCgroup, pids_cgroup_root
from verifier.sandbox_report import attribute, in_context, layer_for_error

__all__ = [
    "Limits",
    "SandboxLayers",
    "SandboxProcess",
    "SandboxResult",
    "describe_sandbox",
    "layer_for_error",
    "run_python",
    "sandbox_layers",
]

log = logging.getLogger("tracemill.verifier.sandbox")

LAUNCHER = Path(__file__).with_name("sandbox_launcher.py")
#: Where the work folder appears inside a namespaced sandbox.
BOX = "/box"
_UID_BASE = 1_000_000 + (os.getpid() % 10_000) * 100


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run."""

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_bytes: int = 512 * 1024**2
    file_bytes: int = 16 * 1024**2
    open_files: int = 64
    processes: int = 32
    #: bytes kept of stdout and of stderr; a stream that passes ``kill_output_bytes`` gets the run killed
    output_bytes: int = 64 * 1024
    kill_output_bytes: int = 4 * 1024**2


@dataclass(frozen=True)
class SandboxLayers:
    """The isolation this machine gives: which tool, which layers, and warnings for the log."""

    tool: str  # "bwrap", "unshare", "sandbox-exec" or "none"
    layers: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    drop_uid: bool = False
    pids_cgroup: bool = False

    def describe(self) -> str:
        text = f"sandbox ({self.tool}): " + ", ".join(self.layers)
        return text + "".join(f"; WARNING: {w}" for w in self.warnings)


@dataclass
class SandboxResult:
    """What a sandboxed run did, and which layers visibly stopped something."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    elapsed_s: float
    killed_by: str | None = None  # "wall-clock" or "output-cap" when we killed it
    output_truncated: bool = False
    stopped_by: list[str] = field(default_factory=list)
    layers: tuple[str, ...] = ()


_BASE_LAYERS = ("own-session", "empty-environment", "isolated-python", "fresh-work-folder", "output-cap",
                "wall-clock")
_RLIMIT_LAYERS = ("rlimit-cpu", "rlimit-memory", "rlimit-file-size", "rlimit-open-files",
                  "rlimit-processes")
_NS_LAYERS = ("network-namespace", "pid-namespace", "mount-namespace", "private-tmp",
              "read-only-system")


def _traversable_by_others(path: str) -> bool:
    """Can an unprivileged uid reach ``path``? (A Python under /root is not reachable.)"""
    p = Path(path).resolve()
    for parent in [*reversed(p.parents), p]:
        try:
            mode = parent.stat().st_mode
        except OSError:
            return False
        if not mode & 0o001:
            return False
    return True


def _python() -> str:
    return os.path.realpath(sys.executable)


def _probe(argv: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20, env={}, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, done.stderr.decode(errors="replace").strip()[:300]


def _bwrap_prefix(workdir: str) -> list[str]:
    root = os.geteuid() == 0
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid",
            "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not root:
        argv += ["--unshare-user", "--cap-drop", "ALL"]
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    prefix = os.path.realpath(sys.base_prefix)
    if not prefix.startswith("/usr/"):
        for parent in reversed(Path(prefix).parents[:-1]):  # bwrap would copy /root's 0700
            argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", prefix, prefix]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime"):
        argv += ["--ro-bind-try", etc, etc]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", workdir, BOX,
             "--ro-bind", str(LAUNCHER), "/launcher/launcher.py", "--chdir", BOX, "--"]
    return argv


def _unshare_prefix() -> list[str]:
    argv = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--ipc", "--uts", "--mount",
            "--mount-proc"]
    if os.geteuid() != 0:
        argv.insert(1, "--user")
        argv.insert(2, "--map-root-user")
    return argv


@functools.cache
def sandbox_layers() -> SandboxLayers:
    """Detect, once, which isolation layers work here (``TRACEMILL_SANDBOX`` forces a tool)."""
    forced = os.environ.get("TRACEMILL_SANDBOX", "").strip().lower()
    warnings: list[str] = []
    if sys.platform == "win32":
        return SandboxLayers("job-object", _BASE_LAYERS + ("job-memory", "job-processes", "job-cpu"),
                             ("Windows has no namespaces here: no network or filesystem isolation",))
    if sys.platform == "darwin":
        tool = "sandbox-exec" if shutil.which("sandbox-exec") and forced != "none" else "none"
        layers = _BASE_LAYERS + _RLIMIT_LAYERS
        if tool == "sandbox-exec":
            layers += ("network denied", "writes only to the work folder")
        return SandboxLayers(tool, layers)
    root = os.geteuid() == 0
    layers: tuple[str, ...] = _BASE_LAYERS + _RLIMIT_LAYERS
    tools = [forced] if forced in ("bwrap", "unshare", "none") else ["bwrap", "unshare"]
    for tool in tools:
        if tool == "none":
            break
        if shutil.which(tool) is None:
            warnings.append(f"{tool} not installed")
            continue
        with tempfile.TemporaryDirectory(prefix="tracemill-probe-") as probe_dir:
            prefix = _bwrap_prefix(probe_dir) if tool == "bwrap" else _unshare_prefix()
            ok, err = _probe([*prefix, _python(), "-I", "-S", "-c", "pass"])
        if ok:
            ns = _NS_LAYERS if tool == "bwrap" else ("network-namespace", "pid-namespace")
            can_drop = root and (tool == "bwrap" or _traversable_by_others(_python()))
            uid = ("unprivileged-uid",) if can_drop else ()
            cgroup = root and not can_drop and pids_cgroup_root() is not None
            if root and not can_drop:  # RLIMIT_NPROC means nothing to root
                layers = tuple(x for x in layers if x != "rlimit-processes")
            return SandboxLayers(tool, layers + ns + uid + (("pids-cgroup",) if cgroup else ()),
                                 tuple(warnings), drop_uid=bool(uid), pids_cgroup=cgroup)
        warnings.append(f"{tool} cannot create namespaces here (user namespaces restricted, e.g. by "
                        f"AppArmor?): {err}")
    if root and _traversable_by_others(_python()):
        return SandboxLayers("none", layers + ("unprivileged-uid",), tuple(warnings), drop_uid=True)
    if root:
        layers = tuple(x for x in layers if x != "rlimit-processes")
    if root and pids_cgroup_root() is not None:
        return SandboxLayers("none", layers + ("pids-cgroup",), tuple(warnings), pids_cgroup=True)
    if root:
        warnings.append("running as root without namespaces and the interpreter is not reachable by an "
                        "unprivileged uid: RLIMIT_NPROC is not enforced and no pids cgroup is available")
    return SandboxLayers("none", layers, tuple(warnings))


def describe_sandbox() -> str:
    """One line saying which sandbox layers are active on this machine (for the startup log)."""
    return sandbox_layers().describe()


_uid_lock = threading.Lock()
_uids_in_use: set[int] = set()


def _take_uid() -> int:
    with _uid_lock:
        for slot in range(100):
            uid = _UID_BASE + slot
            if uid not in _uids_in_use:
                _uids_in_use.add(uid)
                return uid
    raise RuntimeError("more than 100 concurrent sandboxes")


def _release_uid(uid: int) -> None:
    with _uid_lock:
        _uids_in_use.discard(uid)


def _uid_pids(uid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(entry.path).st_uid == uid:
                    pids.append(int(entry.name))
    return pids


def _count_uid(uid: int) -> int:
    return len(_uid_pids(uid))


def _kill_uid(uid: int) -> int:
    """SIGKILL every process owned by ``uid`` (only ever a sandbox's own uid). Returns how many."""
    killed = 0
    for _ in range(20):  # a fork bomb may be forking while we sweep
        found = 0
        for pid in _uid_pids(uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                found += 1
        killed += found
        if not found:
            break
        time.sleep(0.01)
    return killed


def _macos_profile(workdir: str) -> str:
    return ("(version 1)(allow default)(deny network*)(deny file-write*)"
            f'(allow file-write* (subpath "{workdir}") (literal "/dev/null"))')


class _Capped:
    """Drains one pipe, keeping the first ``keep`` bytes and counting the rest."""

    def __init__(self, pipe: object, keep: int, kill_at: int, on_flood: object) -> None:
        self.data = bytearray()
        self.total = 0
        self._keep, self._kill_at, self._on_flood = keep, kill_at, on_flood
        self._pipe = pipe
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while chunk := self._pipe.read1(65536):  # type: ignore[attr-defined]
            self.total += len(chunk)
            room = self._keep - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            if self.total > self._kill_at:
                self._on_flood()  # type: ignore[operator]
                break
        self._pipe.close()  # type: ignore[attr-defined]


class SandboxProcess:
    """A sandboxed Python process running ``script`` (a file in its work folder) with ``args``.

    ``files`` are written into the fresh work folder first. stdin stays open for the caller (see
    :attr:`stdin`) unless ``stdin`` is given; stdout is captured unless ``stdout_pipe`` is True, in
    which case the caller reads :attr:`stdout` itself. Always call :meth:`finish`.
    """

    def __init__(self, script: str, files: Mapping[str, str | bytes], *, limits: Limits | None = None,
                 args: tuple[str, ...] = (), stdout_pipe: bool = False) -> None:
        self.limits = limits or Limits()
        self.layers = sandbox_layers()
        self.killed_by: str | None = None
        self._lock = threading.Lock()
        self._uid = _take_uid() if self.layers.drop_uid else None
        self._cgroup = PidsCgroup(self.limits.processes) if self.layers.pids_cgroup else None
        self.workdir = tempfile.mkdtemp(prefix="tracemill-sbx-")
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            Path(self.workdir, name).write_bytes(data)
        if self._uid is not None:
            os.chmod(self.workdir, 0o700)
            for path in [self.workdir, *(os.path.join(self.workdir, n) for n in files)]:
                os.chown(path, self._uid, self._uid)
        self.started = time.perf_counter()
        self._job = None
        flags = 0
        if self.layers.tool == "job-object":
            from verifier.sandbox_windows import CREATE_SUSPENDED, JobObject

            self._job = JobObject(cpu_s=self.limits.cpu_s, memory_bytes=self.limits.memory_bytes,
                                  processes=self.limits.processes)
            flags = CREATE_SUSPENDED | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
        self.proc = subprocess.Popen(
            self._command(script, args), cwd=self.workdir, env=self._environment(), start_new_session=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
            creationflags=flags,
        )
        if self._job is not None:
            self._job.adopt(self.proc)
        self.stdin = self.proc.stdin
        self.stdout = self.proc.stdout
        lim = self.limits
        self._err = _Capped(self.proc.stderr, lim.output_bytes, lim.kill_output_bytes,
                            lambda: self.kill("output-cap"))
        self._out = None if stdout_pipe else _Capped(self.proc.stdout, lim.output_bytes,
                                                      lim.kill_output_bytes, lambda: self.kill("output-cap"))
        self._timer = threading.Timer(lim.wall_s, self.kill, args=("wall-clock",))
        self._timer.daemon = True
        self._timer.start()

    def _command(self, script: str, args: tuple[str, ...]) -> list[str]:
        lim = self.limits
        spec = {"cpu_s": lim.cpu_s, "memory_bytes": lim.memory_bytes, "file_bytes": lim.file_bytes,
                "open_files": lim.open_files, "processes": lim.processes, "core_bytes": 0,
                "uid": self._uid, "gid": self._uid,
                "cgroup_procs": self._cgroup.procs_file if self._cgroup else None}
        python = _python()
        tool = self.layers.tool
        if tool == "bwrap":
            prefix, launcher, where = _bwrap_prefix(self.workdir), "/launcher/launcher.py", BOX
        else:
            prefix = _unshare_prefix() if tool == "unshare" else []
            launcher, where = str(LAUNCHER), self.workdir
            if tool == "sandbox-exec":
                prefix = ["sandbox-exec", "-p", _macos_profile(self.workdir)]
        return [*prefix, python, "-I", "-S", launcher, json.dumps(spec), "--",
                python, "-I", "-S", f"{where}/{script}", *args]

    def kill(self, reason: str) -> None:
        """Kill the whole sandbox now (recording why, the first time)."""
        with self._lock:
            if self.killed_by is None and self.proc.poll() is None:
                self.killed_by = reason
        self._kill_group()
        if self._uid is not None:
            _kill_uid(self._uid)
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def _environment(self) -> dict[str, str]:
        if sys.platform == "win32":  # Windows cannot start a process without SYSTEMROOT
            return {"SYSTEMROOT": os.environ.get("SYSTEMROOT", r"C:\Windows")}
        return {}

    def _kill_group(self) -> None:
        if self._job is not None:
            self._job.kill()
        with contextlib.suppress(OSError):
            if hasattr(os, "killpg"):
                os.killpg(self.proc.pid, signal.SIGKILL)
            else:  # Windows: no process groups to signal
                self.proc.kill()

    def finish(self, timeout_s: float | None = None) -> SandboxResult:
        """Close stdin, wait for the run to end (killing it past its wall clock), clean up, return."""
        stragglers = 0
        if self.proc.poll() is None and self._uid is not None:
            stragglers = max(0, _count_uid(self._uid) - 1)  # processes beside the main one
        elif self.proc.poll() is None and self._cgroup is not None:
            stragglers = max(0, len(self._cgroup.pids()) - 1)
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout_s if timeout_s is not None else self.limits.wall_s + 5)
        except subprocess.TimeoutExpired:
            self.kill("wall-clock")
            self.proc.wait()
        elapsed = time.perf_counter() - self.started
        self._timer.cancel()
        self._kill_group()  # stragglers left in the group
        if self._job is not None:
            self._job.close()
        if self._uid is not None:
            _kill_uid(self._uid)
            _release_uid(self._uid)
        if self._cgroup is not None:
            self._cgroup.remove()
        self._err.thread.join(timeout=5)
        out = b""
        truncated = self._err.total > len(self._err.data)
        if self._out is not None:
            self._out.thread.join(timeout=5)
            out = bytes(self._out.data)
            truncated = truncated or self._out.total > len(self._out.data)
        shutil.rmtree(self.workdir, ignore_errors=True)
        result = SandboxResult(self.proc.returncode, out, bytes(self._err.data), elapsed,
                               killed_by=self.killed_by, output_truncated=truncated,
                               layers=self.layers.layers)
        result.stopped_by = in_context(attribute(result), result.layers)
        if stragglers:  # a detached child would have outlived the run: the sandbox's end killed it
            sweeper = "pid-namespace" if "pid-namespace" in result.layers else "process-sweep"
            result.stopped_by.append(sweeper)
        return result


def run_python(source: str, *, limits: Limits | None = None, stdin: bytes = b"",
               files: Mapping[str, str | bytes] | None = None) -> SandboxResult:
    """Run ``source`` as a script in a fresh sandbox and collect what it did."""
    proc = SandboxProcess("main.py", {**(files or {}), "main.py": source}, limits=limits)
    try:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    except OSError:
        pass
    return proc.finish()
