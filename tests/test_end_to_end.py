"""End to end with every part real: the default model, a node on loopback over HTTP, SQLite files,
the encrypted-file keystore, and the `tracemill` command run as a user would run it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from client.api import NodeClient
from client.outbox import Outbox
from client.paths import Paths

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.model


def tracemill(
    *args: str, timeout: float = 600, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter with the test's environment (TRACEMILL_HOME etc.)."""
    return subprocess.run(
        [sys.executable, "-m", "client", *args],
        cwd=REPO, env={**os.environ, **(extra_env or {})}, capture_output=True, text=True, timeout=timeout,
    )


def public_key(home: Path) -> str:
    from client.session import open_identity

    identity, _ = open_identity(Paths(home))
    return identity.public_key_hex


def test_fresh_home_contributes_and_wallet_shows_the_node_balance(
    tracemill_home: Path, node_url: str
) -> None:
    run = tracemill("contribute", "--network", node_url, "--tasks", "3")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "credits earned" in run.stdout

    box = Outbox(Paths(tracemill_home).outbox_db)
    rows = box.rows()
    box.close()
    assert len(rows) == 3 * 4  # 3 tasks × the node's group size k = 4
    assert all(r["state"] == "acknowledged" for r in rows), rows
    accepted = {r["trace_id"] for r in rows if r["status"] == "accepted"}
    assert accepted, "an honest client's traces are accepted by the node"

    key = public_key(tracemill_home)
    with NodeClient(node_url) as node:
        balance = node.balance(key, limit=100)
    credited = {e.trace_id for e in balance.entries if e.status == "accepted" and e.amount > 0}
    assert credited == accepted  # the ledger credits exactly the traces it accepted
    assert balance.accepted == len(accepted)
    assert balance.balance == pytest.approx(sum(r["credit"] for r in rows if r["status"] == "accepted"))

    wallet = tracemill("wallet", "--network", node_url)
    assert wallet.returncode == 0, wallet.stdout + wallet.stderr
    assert f"{balance.balance:.2f}" in wallet.stdout

    from tests.keyscan import assert_private_key_absent

    assert_private_key_absent(tracemill_home)

    # A reinstall: back up here, restore in a fresh home, and the node shows that home the same balance.
    backup = tracemill_home.parent / "me.tmkey"
    env = {"TRACEMILL_BACKUP_PASSPHRASE": "another strong backup phrase 7"}
    made = tracemill("wallet", "backup", str(backup), extra_env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    other = tracemill_home.parent / "reinstalled"
    restored = tracemill("wallet", "restore", str(backup), extra_env={**env, "TRACEMILL_HOME": str(other)})
    assert restored.returncode == 0, restored.stdout + restored.stderr
    shown = tracemill("wallet", "--network", node_url, extra_env={"TRACEMILL_HOME": str(other)})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"{balance.balance:.2f}" in shown.stdout
    assert public_key(other) == key
    assert_private_key_absent(other)


def test_run_without_a_network_starts_the_embedded_local_node(tracemill_home: Path) -> None:
    run = tracemill("run", "--headless", "--tasks", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "network: http://127.0.0.1:" in run.stdout
    assert "wallet balance on the network" in run.stdout
    assert Paths(tracemill_home).node_db.is_file()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_node_that_is_down_gives_one_clear_line(tracemill_home: Path) -> None:
    run = tracemill("contribute", "--network", f"http://127.0.0.1:{_closed_port()}", "--tasks", "1")
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("tracemill: error: cannot reach the network node"), run.stderr
    assert "Traceback" not in run.stderr


def test_a_corrupt_model_file_is_refused_with_one_line_and_nothing_runs(
    tracemill_home: Path, node_url: str, default_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model of the right size whose bytes were damaged (a bad disk, an edited file) is never used."""
    models = tracemill_home / "models"
    models.mkdir(parents=True)
    damaged = bytearray(default_model_path.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    (models / default_model_path.name).write_bytes(bytes(damaged))
    monkeypatch.delenv("TRACEMILL_MODELS_DIR")  # only the home's damaged copy is there to find
    run = tracemill("contribute", "--network", node_url, "--tasks", "1")
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("tracemill: error: "), run.stderr
    assert "does not match the network's checksum" in run.stderr
    assert "Traceback" not in run.stderr
    outbox = Paths(tracemill_home).outbox_db
    assert not outbox.exists() or Outbox(outbox).rows() == []
