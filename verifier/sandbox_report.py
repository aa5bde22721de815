"""Which sandbox layer stopped an attempt: read from the kill reason, the exit signal, and the errno
and text of the model's errors. A diagnosis for logs and tests, not a security boundary."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verifier.sandbox import SandboxResult

__all__ = ["attribute", "in_context", "layer_for_error"]

#: errno (by name) to the layer that most likely produced it.
_ERRNO_LAYERS = {
    "ENETUNREACH": "network-namespace", "EADDRNOTAVAIL": "network-namespace",
    "ECONNREFUSED": "network-namespace", "EAI_NONAME": "network-namespace",
    "EROFS": "read-only-system", "ENOENT": "mount-namespace", "ESRCH": "pid-namespace",
    "EACCES": "unprivileged-uid", "EPERM": "unprivileged-uid", "EAGAIN": "rlimit-processes",
    "EMFILE": "rlimit-open-files", "EFBIG": "rlimit-file-size", "ENOMEM": "rlimit-memory",
}
_TEXT_LAYERS = [
    ("MemoryError", "rlimit-memory"), ("Cannot allocate memory", "rlimit-memory"),
    ("Network is unreachable", "network-namespace"), ("Temporary failure in name resolution",
                                                      "network-namespace"),
    ("Name or service not known", "network-namespace"), ("Connection refused", "network-namespace"),
    ("Read-only file system", "read-only-system"), ("Resource temporarily unavailable", "rlimit-processes"),
    ("Too many open files", "rlimit-open-files"), ("File too large", "rlimit-file-size"),
    ("No such process", "pid-namespace"), ("Permission denied", "unprivileged-uid"),
    ("Operation not permitted", "unprivileged-uid"), ("No such file or directory", "mount-namespace"),
    ("No module named", "isolated-python"), ("can't start new thread", "rlimit-processes"),
    ("environ", "empty-environment"), ("getenv", "empty-environment"),
]


def layer_for_error(text: str) -> str | None:
    """The layer an error message (an exception's type, errno name and text) points at, if any."""
    if "ENOENT" in text and "'/tmp/" in text:
        return "private-tmp"
    for name, layer in _ERRNO_LAYERS.items():
        if name in text:
            return layer
    for needle, layer in _TEXT_LAYERS:
        if needle in text:
            return layer
    return None


def attribute(result: SandboxResult) -> list[str]:
    """The layers that visibly stopped something in a finished run."""
    stopped: list[str] = []
    if result.killed_by:
        stopped.append(result.killed_by)
    rc = result.returncode
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if rc is not None and rc > 128 else 0)
    if sig and not result.killed_by:  # a namespace's init reports a signal death as 128 + signal
        if sig == getattr(signal, "SIGXCPU", None):
            stopped.append("rlimit-cpu")
        elif sig == getattr(signal, "SIGXFSZ", None):
            stopped.append("rlimit-file-size")
    text = result.stderr.decode(errors="replace")
    layer = layer_for_error(text)
    if layer and layer not in stopped:
        stopped.append(layer)
    return stopped


def in_context(stopped: list[str], layers: tuple[str, ...]) -> list[str]:
    """Name what stopped a process-count attempt after the layer that holds here (a pids cgroup
    where root kept its uid and RLIMIT_NPROC does not apply)."""
    if "pids-cgroup" in layers:
        stopped = ["pids-cgroup" if s == "rlimit-processes" else s for s in stopped]
    return list(dict.fromkeys(stopped))
