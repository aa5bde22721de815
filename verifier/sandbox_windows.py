"""Windows: a job object around each sandboxed process (no rlimits there).

The process is created suspended, put in a job with limits on memory, active processes and CPU time
that kills everything in it when the job closes, and only then resumed, so no child can start outside
the job. Written against the Win32 documentation; Tracemill's CI has no Windows machine to run it on.
"""

from __future__ import annotations

import ctypes
import subprocess
from ctypes import wintypes
from typing import Any

__all__ = ["CREATE_SUSPENDED", "JobObject"]

CREATE_SUSPENDED = 0x00000004
_LIMIT_PROCESS_TIME = 0x00000002
_LIMIT_ACTIVE_PROCESS = 0x00000008
_LIMIT_PROCESS_MEMORY = 0x00000100
_LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x00000400
_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
_EXTENDED_LIMIT_INFORMATION = 9


class _IoCounters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
        "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class _BasicLimits(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", wintypes.DWORD), ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", wintypes.DWORD),
        ("Affinity", ctypes.c_size_t), ("PriorityClass", wintypes.DWORD), ("SchedulingClass", wintypes.DWORD),
    ]


class _ExtendedLimits(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", _BasicLimits), ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


class JobObject:
    """A job holding one suspended process: limits applied, then resumed; closing it kills the lot."""

    def __init__(self, *, cpu_s: int, memory_bytes: int, processes: int) -> None:
        self._k32: Any = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        self._ntdll: Any = ctypes.WinDLL("ntdll")  # type: ignore[attr-defined]
        self.handle = self._k32.CreateJobObjectW(None, None)
        if not self.handle:
            raise OSError(ctypes.get_last_error(), "CreateJobObjectW failed")  # type: ignore[attr-defined]
        info = _ExtendedLimits()
        basic = info.BasicLimitInformation
        basic.LimitFlags = (_LIMIT_PROCESS_TIME | _LIMIT_ACTIVE_PROCESS | _LIMIT_PROCESS_MEMORY
                            | _LIMIT_DIE_ON_UNHANDLED_EXCEPTION | _LIMIT_KILL_ON_JOB_CLOSE)
        basic.PerProcessUserTimeLimit = cpu_s * 10_000_000  # units of 100 ns
        basic.ActiveProcessLimit = processes
        info.ProcessMemoryLimit = memory_bytes
        if not self._k32.SetInformationJobObject(self.handle, _EXTENDED_LIMIT_INFORMATION,
                                                 ctypes.byref(info), ctypes.sizeof(info)):
            raise OSError(ctypes.get_last_error(), "SetInformationJobObject failed")  # type: ignore[attr-defined]

    def adopt(self, proc: subprocess.Popen[bytes]) -> None:
        """Put a process created with CREATE_SUSPENDED into the job, then let it run."""
        handle = int(proc._handle)  # type: ignore[attr-defined]
        if not self._k32.AssignProcessToJobObject(self.handle, handle):
            proc.kill()
            raise OSError(ctypes.get_last_error(), "AssignProcessToJobObject failed")  # type: ignore[attr-defined]
        self._ntdll.NtResumeProcess(handle)

    def kill(self) -> None:
        self._k32.TerminateJobObject(self.handle, 1)

    def close(self) -> None:
        if self.handle:
            self._k32.CloseHandle(self.handle)
            self.handle = None
