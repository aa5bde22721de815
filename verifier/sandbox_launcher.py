"""The sandbox's trusted launcher: set resource limits, drop privileges, then exec the payload.

Runs as ``python -I -S sandbox_launcher.py LIMITS_JSON -- ARGV...`` inside whatever namespaces the
sandbox set up, before any untrusted code. Standard library only; it must stay small enough to audit.
Limits are set here rather than in ``preexec_fn`` (unsafe with threads, and absent on some platforms).
"""

import json
import os
import sys


def _set_limits(limits: dict) -> None:
    try:
        import resource
    except ImportError:  # Windows: no rlimits (the sandbox reports that layer as missing)
        return

    table = {
        "cpu_s": resource.RLIMIT_CPU,
        "memory_bytes": resource.RLIMIT_AS,
        "file_bytes": resource.RLIMIT_FSIZE,
        "open_files": resource.RLIMIT_NOFILE,
        "processes": resource.RLIMIT_NPROC,
        "core_bytes": resource.RLIMIT_CORE,
    }
    for key, which in table.items():
        value = limits.get(key)
        if value is None:
            continue
        hard = value + 1 if key == "cpu_s" else value  # SIGXCPU at the soft limit, SIGKILL at hard
        resource.setrlimit(which, (value, hard))


def _drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("sandbox launcher: could not drop privileges")


def main(argv: list) -> None:
    limits = json.loads(argv[1])
    payload = argv[argv.index("--") + 1 :]
    os.umask(0o077)
    if limits.get("cgroup_procs"):  # join the run's pids cgroup before anything can fork
        with open(limits["cgroup_procs"], "w") as f:
            f.write(str(os.getpid()))
    if limits.get("uid") is not None and os.getuid() == 0:
        _drop_privileges(limits["uid"], limits["gid"])
    _set_limits(limits)
    if os.name == "nt":  # Windows has no exec: run the payload as a child (it stays in the job object)
        import subprocess

        env = {"SYSTEMROOT": os.environ.get("SYSTEMROOT", "C:\\Windows")}
        sys.exit(subprocess.call(payload, env=env))
    os.execve(payload[0], payload, {})  # an empty environment: no secrets inherited


if __name__ == "__main__":
    main(sys.argv)
