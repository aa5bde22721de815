"""The node database's schema as named, ordered migrations (STYLE.md #5).

A migration is applied once, in order, in its own transaction, and recorded in ``migrations``;
``PRAGMA user_version`` mirrors the latest applied version so any SQLite tool can read it. Never edit a
migration that has shipped: add the next one.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "SchemaTooNewError", "migrate"]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "contributors_and_nonces",
        """
        CREATE TABLE contributors (
            public_key    TEXT PRIMARY KEY,
            registered_at REAL NOT NULL
        );
        CREATE TABLE nonces (
            public_key TEXT NOT NULL,
            nonce      TEXT NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (public_key, nonce)
        );
        CREATE INDEX nonces_by_expiry ON nonces (expires_at);
        """,
    ),
    Migration(
        2,
        "leases",
        """
        CREATE TABLE leases (
            lease_id     TEXT PRIMARY KEY,
            contributor  TEXT NOT NULL REFERENCES contributors (public_key),
            model_sha256 TEXT NOT NULL,
            seed         INTEGER NOT NULL,
            task_seed    INTEGER NOT NULL,
            issued_at    REAL NOT NULL,
            expires_at   REAL NOT NULL
        );
        CREATE INDEX leases_by_contributor ON leases (contributor);
        CREATE TABLE lease_tasks (
            lease_id   TEXT NOT NULL REFERENCES leases (lease_id),
            task_id    TEXT NOT NULL,
            position   INTEGER NOT NULL,
            group_size INTEGER NOT NULL,
            task_json  TEXT NOT NULL,
            PRIMARY KEY (lease_id, task_id)
        );
        """,
    ),
    Migration(
        3,
        "traces_and_ledger",
        """
        CREATE TABLE traces (
            trace_id     TEXT PRIMARY KEY,
            contributor  TEXT NOT NULL REFERENCES contributors (public_key),
            lease_id     TEXT NOT NULL,
            task_id      TEXT NOT NULL,
            sample_index INTEGER NOT NULL,
            signed_json  TEXT NOT NULL,
            status       TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
            reason       TEXT NOT NULL DEFAULT '',
            node_score   REAL,
            credit       REAL NOT NULL DEFAULT 0,
            received_at  REAL NOT NULL
        );
        -- one credited trace per (lease, task, sample): a second, different trace for it is refused
        CREATE UNIQUE INDEX traces_one_credit_per_sample
            ON traces (lease_id, task_id, sample_index) WHERE status = 'accepted';
        CREATE TABLE ledger (
            entry_id    INTEGER PRIMARY KEY AUTOINCREMENT,
            contributor TEXT NOT NULL REFERENCES contributors (public_key),
            trace_id    TEXT NOT NULL REFERENCES traces (trace_id),
            task_id     TEXT NOT NULL,
            status      TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
            amount      REAL NOT NULL,
            reason      TEXT NOT NULL DEFAULT '',
            created_at  REAL NOT NULL
        );
        CREATE INDEX ledger_by_contributor ON ledger (contributor, entry_id);
        """,
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer node than this one."""


def _applied(conn: sqlite3.Connection) -> int:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    row = conn.execute("SELECT max(version) FROM migrations").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[str]:
    """Bring the schema up to date; returns the names of the migrations applied now.

    ``conn`` must be in autocommit mode (``isolation_level=None``): each migration is its own
    ``BEGIN IMMEDIATE`` transaction, so a crash leaves the file at the last complete version.
    """
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)) or versions[0] != 1:
        raise ValueError("migrations must be numbered 1, 2, ... in order")
    done: list[str] = []
    current = _applied(conn)
    if current > versions[-1]:
        raise SchemaTooNewError(
            f"this database has schema version {current}, newer than this node knows ({versions[-1]}); "
            "upgrade Tracemill"
        )
    for m in migrations:
        if m.version <= current:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _applied(conn) >= m.version:  # another process got there first
                conn.execute("ROLLBACK")
                continue
            for statement in _statements(m.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (m.version, m.name, time.time()),
            )
            conn.execute(f"PRAGMA user_version = {int(m.version)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        done.append(m.name)
    return done


def _statements(sql: str) -> list[str]:
    """Split a migration's SQL into statements (executescript would commit our transaction)."""
    statements: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:80]}")
    return statements
