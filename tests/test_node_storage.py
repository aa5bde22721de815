"""The node's SQLite file: WAL, schema version, named migrations applied in order, nonce expiry; and
`tracemill node` run in the foreground as an operator would."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from network.migrations import MIGRATIONS, SCHEMA_VERSION, Migration, SchemaTooNewError, migrate
from network.storage import Storage
from tests.test_node_support import write_model_file

REPO = Path(__file__).resolve().parent.parent


def applied(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return [(v, n) for v, n in conn.execute("SELECT version, name FROM migrations ORDER BY version")]


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_a_fresh_database_is_fully_migrated_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "node.sqlite"
    storage = Storage(db)
    assert storage.schema_version() == SCHEMA_VERSION == len(MIGRATIONS)
    assert storage.journal_mode() == "wal"
    assert applied(db) == [(m.version, m.name) for m in MIGRATIONS]
    assert {"contributors", "nonces", "leases", "lease_tasks", "traces", "ledger"} <= tables(db)


def test_reopening_applies_nothing_and_keeps_data(tmp_path: Path) -> None:
    db = tmp_path / "node.sqlite"
    Storage(db).register("ab" * 32, now=100.0)
    again = Storage(db)
    assert applied(db) == [(m.version, m.name) for m in MIGRATIONS]
    assert again.register("ab" * 32, now=200.0).registered_at == 100.0


def test_an_older_database_is_upgraded_in_order(tmp_path: Path) -> None:
    db = tmp_path / "node.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    assert migrate(conn, MIGRATIONS[:1]) == [MIGRATIONS[0].name]
    conn.execute("INSERT INTO contributors (public_key, registered_at) VALUES (?, ?)", ("cd" * 32, 5.0))
    conn.close()
    assert "ledger" not in tables(db)
    storage = Storage(db)
    assert storage.schema_version() == SCHEMA_VERSION
    assert applied(db) == [(m.version, m.name) for m in MIGRATIONS]
    assert storage.register("cd" * 32, now=9.0).registered_at == 5.0


def test_a_failing_migration_leaves_the_last_good_version(tmp_path: Path) -> None:
    db = tmp_path / "node.sqlite"
    broken = (
        *MIGRATIONS,
        Migration(SCHEMA_VERSION + 1, "broken", "CREATE TABLE half (x);\nSELECT nonsense FROM;"),
    )
    conn = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, broken)
    conn.close()
    assert "half" not in tables(db)
    assert Storage(db).schema_version() == SCHEMA_VERSION


def test_a_database_from_a_newer_node_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "node.sqlite"
    Storage(db)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO migrations VALUES (?, 'from_the_future', 0)", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNewError):
        Storage(db)


def test_nonces_are_refused_once_and_purged_after_expiry(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "node.sqlite")
    key = "ef" * 32
    assert storage.use_nonce(key, "n1", now=1000.0, expires_at=1600.0)
    assert not storage.use_nonce(key, "n1", now=1001.0, expires_at=1601.0)
    assert storage.use_nonce("12" * 32, "n1", now=1001.0, expires_at=1601.0)  # nonces are per key
    assert storage.nonce_count() == 2
    assert storage.use_nonce(key, "n2", now=2000.0, expires_at=2600.0)
    assert storage.nonce_count() == 1  # the expired ones went when n2 came


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_tracemill_node_runs_in_the_foreground_until_stopped(tmp_path: Path, stop: signal.Signals) -> None:
    model = write_model_file(tmp_path)
    db = tmp_path / "op" / "node.sqlite"
    env = {**os.environ, "TRACEMILL_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "client.cli",
        "node",
        "--port",
        "0",
        "--db",
        str(db),
        "--model-file",
        str(model),
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if line.startswith("serving"):
                break
        url = next(x.split(" ", 1)[1] for x in lines if x.startswith("node: "))
        assert httpx.get(f"{url}/v1/info", timeout=30).status_code == 200
        assert f"database: {db}" in lines
        assert any(x.startswith("accepted model: ") and model.name in x for x in lines)
        assert any(x.startswith("families: ") for x in lines)
        proc.send_signal(stop)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "\n".join(lines) + out
    assert db.is_file()
