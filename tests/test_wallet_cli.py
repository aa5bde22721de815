"""`tracemill wallet …` run as a user runs it (a fresh interpreter per command), with the encrypted-file
keystore and a real node on loopback (serving a stand-in model file: only the ledger is used here)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import pytest

from protocol import Balance, LedgerEntry
from tests.keyscan import assert_no_key_material
from wallet.backup import recovery_phrase
from wallet.identity import Identity
from wallet.keystore import load_identity, read_info
from wallet.ledger import LedgerCache
from wallet.view import build_view, render_text

REPO = Path(__file__).resolve().parent.parent
KEY_PW = "correct horse battery staple 42"
BACKUP_PW = "a separate backup passphrase 9"


def cli_env(home: Path, **env: str) -> dict[str, str]:
    return {**os.environ, "TRACEMILL_HOME": str(home), "TRACEMILL_PASSPHRASE": KEY_PW,
            "TRACEMILL_KEYSTORE": "file", "TRACEMILL_BACKUP_PASSPHRASE": BACKUP_PW, **env}


def tracemill(
    home: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    full = cli_env(home, **env)
    full.pop("DBUS_SESSION_BUS_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "client", *args], cwd=REPO, env=full, input=stdin,
                          capture_output=True, text=True, timeout=120)


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def one_line_error(proc: subprocess.CompletedProcess[str], text: str) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("tracemill: error: ") and text in lines[-1], proc.stderr


def identity_of(home: Path):  # type: ignore[no-untyped-def]
    info = read_info(home / "wallet")
    assert info is not None
    return load_identity(home / "wallet", info, passphrase=lambda: KEY_PW)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[str]:
    from network.server import NodeServer

    model = tmp_path / "standin.gguf"
    model.write_bytes(b"GGUF" + os.urandom(1024))
    server = NodeServer(tmp_path / "node.sqlite", model_files={model.name: model})
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


def test_backup_then_restore_in_another_home(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shown = ok(tracemill(a, "wallet", "--offline"))
    address = ok(tracemill(a, "wallet", "address")).strip()
    assert f"Address:    {address}" in shown and "Key store:  encrypted file" in shown
    me = identity_of(a)
    assert ok(tracemill(a, "wallet", "address", "--hex")).strip() == me.public_key_hex

    backup = tmp_path / "me.tmkey"
    out = ok(tracemill(a, "wallet", "backup", str(backup)))
    assert address in out and backup.is_file()
    one_line_error(tracemill(a, "wallet", "backup", str(backup)), "already exists")

    # A wrong passphrase: one clear line, and the new home gets nothing.
    one_line_error(tracemill(b, "wallet", "restore", str(backup), TRACEMILL_BACKUP_PASSPHRASE="nope nope"),
                   "Wrong passphrase")
    assert read_info(b / "wallet") is None and not (b / "wallet" / "key.enc").exists()

    out = ok(tracemill(b, "wallet", "restore", str(backup)))
    assert f"Restored {address}" in out
    assert ok(tracemill(b, "wallet", "address")).strip() == address
    assert identity_of(b).sign(b"x") == me.sign(b"x")
    assert_no_key_material([a, b, backup], me)


def test_restore_over_an_existing_key_needs_yes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ok(tracemill(a, "wallet", "address"))
    ok(tracemill(a, "wallet", "backup", str(tmp_path / "a.tmkey")))
    old_b = ok(tracemill(b, "wallet", "address")).strip()
    one_line_error(tracemill(b, "wallet", "restore", str(tmp_path / "a.tmkey")), "--yes")
    assert ok(tracemill(b, "wallet", "address")).strip() == old_b
    out = ok(tracemill(b, "wallet", "restore", str(tmp_path / "a.tmkey"), "--yes"))
    assert "previous key is kept" in out
    kept = list((b / "wallet" / "replaced").iterdir())
    assert len(kept) == 1
    # The kept key restores the old address (it is encrypted with its old key-file passphrase).
    c = tmp_path / "c"
    ok(tracemill(c, "wallet", "restore", str(kept[0]), TRACEMILL_BACKUP_PASSPHRASE=KEY_PW))
    assert ok(tracemill(c, "wallet", "address")).strip() == old_b


def test_recovery_phrase_restore_and_phrase_only_on_a_terminal(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    address = ok(tracemill(a, "wallet", "address")).strip()
    phrase = recovery_phrase(identity_of(a))
    refused = tracemill(a, "wallet", "backup", "--phrase")
    one_line_error(refused, "only shown on a terminal")
    assert " ".join(phrase.split()[:4]) not in refused.stdout + refused.stderr
    words = phrase.split()
    words[3], words[4] = words[4], words[3]
    if words != phrase.split():
        bad = tracemill(b, "wallet", "restore", "--phrase", stdin=" ".join(words) + "\n")
        assert bad.returncode == 1 and read_info(b / "wallet") is None
    ok(tracemill(b, "wallet", "restore", "--phrase", "--expect-address", address, stdin=phrase + "\n"))
    assert ok(tracemill(b, "wallet", "address")).strip() == address
    # On a terminal the phrase is shown (and nothing of it reaches the logs).
    assert phrase in run_on_terminal(a, "wallet", "backup", "--phrase")
    assert_no_key_material([a / "logs", b], identity_of(a))


def run_on_terminal(home: Path, *args: str) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "client", *args], cwd=REPO, env=cli_env(home),
                            stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0, b"".join(chunks)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_show_and_export_sync_from_a_real_node(tmp_path: Path, node: str) -> None:
    home = tmp_path / "h"
    out = ok(tracemill(home, "wallet", "--network", node))
    assert "Balance:    0.00 credits" in out and "Synced:     never" not in out and "Offline" not in out
    out = ok(tracemill(home, "wallet", "show", "--network", node))
    assert "Balance:    0.00 credits" in out
    csv_file = tmp_path / "e.csv"
    assert "0 ledger entries" in ok(tracemill(home, "wallet", "export-csv", str(csv_file), "--network", node))
    assert csv_file.read_text().startswith("entry_id,time_utc,status,amount,reason")


def test_show_when_the_node_is_down_shows_the_cache(tmp_path: Path) -> None:
    out = ok(tracemill(tmp_path / "h", "wallet", "--network", "http://127.0.0.1:9"))
    assert "Offline:" in out and "cannot reach" in out and "Balance:    0.00" in out


def test_view_shows_pending_accepted_rejected_and_why(tmp_path: Path) -> None:
    from wallet.keystore import KeystoreInfo

    me = Identity.generate()
    info = KeystoreInfo(me.public_key_hex, me.address, "file", "encrypted file", "x", 0)
    t0 = 1772359200.0  # 2026-03-01 10:00 UTC
    entries = [
        LedgerEntry(entry_id=i, contributor=me.public_key_hex, trace_id=f"{i:064x}", task_id=f"task-{i}",
                    status=status, amount=amt, reason=why, created_at=t0 + i * 3600)  # type: ignore[arg-type]
        for i, (status, amt, why) in enumerate(
            [("accepted", 1.25, ""), ("rejected", 0.0, "answer does not match"),
             ("rejected", 0.0, "answer does not match"), ("accepted", 1.25, "")], start=1)
    ]
    with LedgerCache.in_wallet(tmp_path / "w") as cache:
        balance = Balance(contributor=me.public_key_hex, balance=2.5, accepted=2, rejected=2, entries=entries)
        cache.sync(balance, network="http://n")
        text = render_text(build_view(cache, info, network="http://n", pending=5, tz=UTC), tz=UTC)
    assert "Balance:    2.50 credits" in text
    assert "2 accepted, 2 rejected, 5 pending" in text
    assert "      2  answer does not match" in text
    assert "2026-03-01        2.50 credits  (2 accepted, 2 rejected)" in text
    assert "2026-03-01 14:00  accepted      +1.25  task-4" in text
    assert "rejected             task-3  answer does not match" in text
