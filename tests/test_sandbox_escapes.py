"""Escape attempts, each an answer to a code task: every one fails, the machine is unharmed, and the
sandbox names the layer that stopped it. The task's test passes only if the attempt succeeded."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from verifier.code import run_tests
from verifier.sandbox import Limits, sandbox_layers

# The task's test passes only if the attempt worked; a detached child cannot know whether it will
# outlive the run, so that attempt returns "detached" and the check is that no survivor is left.
PROMPT = 'def attempt():\n    """Try to break out of the sandbox; return "escaped" if it worked."""\n'
TEST = 'def check(candidate):\n    assert candidate() == "escaped"\n'
LIMITS = Limits(
    wall_s=3.0,
    cpu_s=1,
    memory_bytes=256 * 1024**2,
    processes=16,
    output_bytes=8192,
    kill_output_bytes=256 * 1024,
)
TOKEN = hashlib.sha256(os.urandom(8)).hexdigest()[:12]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """Things on the host an attempt would like to reach: secrets, a loopback server, files."""
    base = tmp_path_factory.mktemp("host")
    (base / "home" / ".ssh").mkdir(parents=True)
    ssh_key = base / "home" / ".ssh" / "id_ed25519"
    ssh_key.write_text(f"PRIVATE-KEY-{TOKEN}")
    ssh_key.chmod(0o600)
    (base / "wallet").mkdir()
    keystore = base / "wallet" / "key.enc"
    keystore.write_text(f"KEYSTORE-{TOKEN}")
    keystore.chmod(0o600)
    tmp_marker = Path(f"/tmp/tracemill-host-{TOKEN}")
    tmp_marker.write_text("host only")
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[object] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    os.environ["TRACEMILL_ESCAPE_SECRET"] = f"SECRET-{TOKEN}"
    yield {
        "ssh_key": str(ssh_key),
        "keystore": str(keystore),
        "port": server.getsockname()[1],
        "accepted": accepted,
        "outside": str(base / f"outside-{TOKEN}.txt"),
        "tmp_marker": str(tmp_marker),
        "verifier_file": str(ROOT / "verifier" / "gym.py"),
    }
    server.close()
    tmp_marker.unlink()
    del os.environ["TRACEMILL_ESCAPE_SECRET"]


def _body(lines: str) -> str:
    return "import os, sys, socket, signal, subprocess, time\n\ndef attempt():\n" + "".join(
        f"    {line}\n" for line in lines.strip("\n").splitlines()
    )


#: host paths are hidden by the private mount namespace, and /tmp by the private /tmp
HIDDEN = {"mount-namespace", "private-tmp"}

ATTEMPTS: dict[str, tuple[str, set[str]]] = {
    # writing outside the work folder
    "write_host_path": ('open({outside!r}, "w").write("x"); return "escaped"', HIDDEN),
    "write_parent_dir": (
        'open("../escape.txt", "w").write("x"); return "escaped"',
        {"unprivileged-uid", "read-only-system"},
    ),
    "write_system_dir": (
        'open("/usr/lib/tracemill-escape", "w").write("x"); return "escaped"',
        {"read-only-system", "unprivileged-uid"},
    ),
    "append_verifier_source": (
        'open({verifier_file!r}, "a").write("#"); return "escaped"',
        # a checkout under /tmp is hidden by the private /tmp, anywhere else by the mount namespace
        {"mount-namespace", "private-tmp"},
    ),
    "overwrite_etc_passwd": (
        'open("/etc/passwd", "a").write("evil::0:0::/:/bin/sh"); return "escaped"',
        {"unprivileged-uid", "read-only-system", "mount-namespace"},
    ),
    "symlink_to_host": (
        'os.symlink({outside!r}, "link"); open("link", "w").write("x"); return "escaped"',
        HIDDEN,
    ),
    "fill_the_disk": (
        'f = open("big", "wb")\nfor _ in range(64): f.write(b"x" * 1024 * 1024)\nreturn "escaped"',
        {"rlimit-file-size"},
    ),
    # reading secrets
    "read_ssh_key": ("return open({ssh_key!r}).read()", HIDDEN),
    "read_keystore": ("return open({keystore!r}).read()", HIDDEN),
    "read_home_ssh": ('return open(os.path.expanduser("~/.ssh/id_rsa")).read()', {"mount-namespace"}),
    "read_root_history": ('return open("/root/.bash_history").read()', {"mount-namespace"}),
    "read_host_tmp": ("return open({tmp_marker!r}).read()", {"private-tmp"}),
    "read_init_environ": ('return open("/proc/1/environ").read()', {"unprivileged-uid"}),
    "environment_secret": ('return os.environ["TRACEMILL_ESCAPE_SECRET"]', {"empty-environment"}),
    "getenv_home": ('return os.getenv("HOME") or os.environ["HOME"]', {"empty-environment"}),
    # the network
    "loopback_server": (
        'socket.create_connection(("127.0.0.1", {port}), timeout=2); return "escaped"',
        {"network-namespace"},
    ),
    "internet_tcp": (
        'socket.create_connection(("1.1.1.1", 443), timeout=2); return "escaped"',
        {"network-namespace"},
    ),
    "dns_lookup": ('socket.getaddrinfo("pypi.org", 443); return "escaped"', {"network-namespace"}),
    "udp_packet": (
        's = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b"x", ("8.8.8.8", 53))\n'
        'return "escaped"',
        {"network-namespace"},
    ),
    # processes
    "fork_bomb": ("while True:\n    os.fork()", {"rlimit-processes"}),
    "thread_bomb": (
        "import threading\nfor _ in range(10000):\n    threading.Thread(target=time.sleep, "
        "args=(30,)).start()\nreturn 'escaped'",
        {"rlimit-processes"},
    ),
    "setsid_survivor": (
        'if os.fork() == 0:\n    os.setsid()\n    os.execv(sys.executable, [sys.executable, "-c", '
        '"import time; time.sleep(600)  # {token}"])\nreturn "detached"',
        {"pid-namespace"},
    ),
    "signal_host_pid": ("os.kill({host_pid}, signal.SIGKILL); return 'escaped'", {"pid-namespace"}),
    "signal_parent": ("os.kill(os.getppid(), signal.SIGKILL); return 'escaped'", {"unprivileged-uid"}),
    "become_root": ('os.setuid(0); return "escaped"', {"unprivileged-uid"}),
    # resources
    "memory_bomb": ('x = bytearray(4 * 1024**3); return "escaped"', {"rlimit-memory"}),
    "memory_creep": ("x = []\nwhile True:\n    x.append(bytearray(16 * 1024**2))", {"rlimit-memory"}),
    "infinite_loop": ("while True:\n    pass", {"rlimit-cpu"}),
    "sleep_forever": ('time.sleep(3600); return "escaped"', {"wall-clock"}),
    "huge_output": ('while True:\n    print("x" * 65536)', {"output-cap"}),
    "flood_answer_channel": (
        'for fd in range(3, 10):\n    try:\n        os.write(fd, b"x" * 4 * 1024**2)\n'
        '    except OSError:\n        pass\nreturn "escaped"',
        {"output-cap"},
    ),
    "open_many_files": (
        'fs = [open("f%d" % i, "w") for i in range(10000)]; return "escaped"',
        {"rlimit-open-files"},
    ),
    # the sandbox's own python
    "import_site_packages": ('import reasoning_gym; return "escaped"', {"isolated-python"}),
}


def _leftovers() -> list[int]:
    """Processes still owned by a sandbox uid (1,000,000 and up)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid >= 1_000_000:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _survivors() -> list[str]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if TOKEN.encode() in cmdline and str(os.getpid()).encode() not in cmdline:
                found.append(entry.name)
    return found


def test_there_are_at_least_30_attempts() -> None:
    assert len(ATTEMPTS) >= 30


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the namespace layers are Linux's")
def test_linux_layers_are_active_here() -> None:
    layers = sandbox_layers()
    assert layers.tool == "bwrap", layers.describe()
    assert {"network-namespace", "pid-namespace", "mount-namespace", "unprivileged-uid"} <= set(layers.layers)


@pytest.mark.parametrize("name", sorted(ATTEMPTS))
def test_escape_attempt_fails(name: str, host: dict[str, object]) -> None:
    code, expected_layers = ATTEMPTS[name]
    values = {**host, "host_pid": os.getpid(), "token": TOKEN}
    verifier_before = Path(str(host["verifier_file"])).read_bytes()
    run = run_tests(
        _body(code.format(**values)), prompt=PROMPT, test=TEST, entry_point="attempt", limits=LIMITS
    )

    assert not run.passed and run.score == 0.0, (name, run.failures)
    assert set(run.stopped_by) & expected_layers, (
        name,
        run.stopped_by,
        run.failures,
        run.sandbox and run.sandbox.stderr[-500:],
    )
    # the machine is unharmed
    assert not Path(str(host["outside"])).exists()
    assert not Path("../escape.txt").exists() and not Path("/usr/lib/tracemill-escape").exists()
    assert Path(str(host["verifier_file"])).read_bytes() == verifier_before
    assert host["accepted"] == []
    assert _leftovers() == [] and _survivors() == []
    assert run.sandbox is not None and len(run.sandbox.stderr) <= LIMITS.output_bytes
    os.kill(os.getpid(), 0)  # still alive


def test_the_fallback_without_namespaces_still_has_rlimits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where namespaces are not allowed the sandbox falls back, says so, and rlimits still hold."""
    monkeypatch.setenv("TRACEMILL_SANDBOX", "none")
    sandbox_layers.cache_clear()
    try:
        layers = sandbox_layers()
        assert layers.tool == "none" and "network-namespace" not in layers.layers
        names = ["memory_bomb", "infinite_loop", "environment_secret", "huge_output", "setsid_survivor"]
        process_cap = {"unprivileged-uid", "pids-cgroup"} & set(layers.layers)
        if process_cap:  # never a fork bomb as root without a process cap
            names += ["fork_bomb", "thread_bomb"]
        else:
            assert any("RLIMIT_NPROC" in w for w in layers.warnings) or os.geteuid() != 0
        for name in names:
            code, expected = ATTEMPTS[name]
            if name in ("fork_bomb", "thread_bomb"):
                expected = {"rlimit-processes", "pids-cgroup"}
            if name == "setsid_survivor":
                expected = {"process-sweep"}
            run = run_tests(_body(code.format(token=TOKEN)), prompt=PROMPT, test=TEST, entry_point="attempt",
                            limits=LIMITS)
            assert not run.passed and set(run.stopped_by) & expected, (name, run.stopped_by)
            assert _survivors() == []
        assert _leftovers() == []
    finally:
        sandbox_layers.cache_clear()


def test_unshare_fallback_cuts_the_network(monkeypatch: pytest.MonkeyPatch, host: dict[str, object]) -> None:
    monkeypatch.setenv("TRACEMILL_SANDBOX", "unshare")
    sandbox_layers.cache_clear()
    try:
        assert sandbox_layers().tool == "unshare"
        code, expected = ATTEMPTS["loopback_server"]
        run = run_tests(
            _body(code.format(**host)), prompt=PROMPT, test=TEST, entry_point="attempt", limits=LIMITS
        )
        assert not run.passed and "network-namespace" in run.stopped_by
        assert host["accepted"] == []
    finally:
        sandbox_layers.cache_clear()


def test_signal_module_is_real() -> None:
    assert signal.SIGKILL == 9  # the attempts above rely on POSIX signals
