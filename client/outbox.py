"""The durable outbox: every signed trace is written here, in one transaction, before any upload.

A crash, a full disk or a dead network loses nothing that was signed: traces stay ``queued`` until the
node answers with a receipt (accepted, rejected or duplicate), which moves them to ``acknowledged``.
SQLite in WAL mode; the schema carries its version (``PRAGMA user_version``) and upgrades itself.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from protocol import Receipt, SignedTrace

__all__ = ["Outbox", "OutboxError", "OutboxStats"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_traces",
        """
        CREATE TABLE traces (
            trace_id     TEXT PRIMARY KEY,
            lease_id     TEXT NOT NULL,
            task_id      TEXT NOT NULL,
            sample_index INTEGER NOT NULL,
            signed_json  TEXT NOT NULL,
            passed       INTEGER NOT NULL,
            state        TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'acknowledged')),
            status       TEXT CHECK (status IN ('accepted', 'rejected', 'duplicate')),
            reason       TEXT NOT NULL DEFAULT '',
            credit       REAL NOT NULL DEFAULT 0,
            attempts     INTEGER NOT NULL DEFAULT 0,
            last_error   TEXT NOT NULL DEFAULT '',
            created_at   REAL NOT NULL,
            acked_at     REAL
        );
        CREATE INDEX traces_state ON traces(state, created_at);
        """,
    ),
]


class OutboxError(Exception):
    """The outbox file cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class OutboxStats:
    queued: int
    accepted: int
    rejected: int
    duplicate: int
    credit: float

    @property
    def acknowledged(self) -> int:
        return self.accepted + self.rejected + self.duplicate


class Outbox:
    """Signed traces waiting for, or holding, the node's receipt. Safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._lock = threading.Lock()
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise OutboxError(
                f"the outbox {path} is damaged or not a database ({exc}); move it aside to start a new one"
            ) from exc

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise OutboxError(f"the outbox {self.path} was written by a newer Tracemill; update the app")
        for number, (_name, sql) in enumerate(MIGRATIONS[version:], start=version + 1):
            with self._tx() as db:
                for statement in sql.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    def add(self, traces: Iterable[SignedTrace]) -> int:
        """Store signed traces in one transaction; a trace already present is left as it is."""
        rows = [
            (
                s.trace.trace_id,
                s.trace.lease_id,
                s.trace.task_id,
                s.trace.sample_index,
                s.model_dump_json(),
                int(s.trace.verdict.passed),
                time.time(),
            )
            for s in traces
        ]
        try:
            with self._tx() as db:
                cur = db.executemany(
                    "INSERT OR IGNORE INTO traces (trace_id, lease_id, task_id, sample_index, signed_json,"
                    " passed, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                return cur.rowcount
        except sqlite3.OperationalError as exc:
            raise OutboxError(f"cannot write the outbox {self.path}: {exc} (is the disk full?)") from exc

    def pending(self, limit: int = 64) -> list[SignedTrace]:
        """The oldest queued traces, at most ``limit``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT signed_json FROM traces WHERE state = 'queued' ORDER BY created_at LIMIT ?", (limit,)
            ).fetchall()
        return [SignedTrace.model_validate_json(r[0]) for r in rows]

    def acknowledge(self, receipts: Iterable[Receipt]) -> None:
        """Record the node's receipts; the traces leave the queue."""
        now = time.time()
        with self._tx() as db:
            db.executemany(
                "UPDATE traces SET state = 'acknowledged', status = ?, reason = ?, credit = ?, acked_at = ?"
                " WHERE trace_id = ?",
                [(r.status, r.reason, r.credit, now, r.trace_id) for r in receipts],
            )

    def record_failure(self, trace_ids: Iterable[str], error: str) -> None:
        """Note a failed upload attempt; the traces stay queued."""
        with self._tx() as db:
            db.executemany(
                "UPDATE traces SET attempts = attempts + 1, last_error = ? WHERE trace_id = ?",
                [(error[:500], t) for t in trace_ids],
            )

    def stats(self) -> OutboxStats:
        with self._lock:
            rows = dict(
                (k or "queued", (n, c))
                for k, n, c in self._db.execute(
                    "SELECT status, COUNT(*), COALESCE(SUM(credit), 0) FROM traces GROUP BY status"
                )
            )
        get = lambda k: rows.get(k, (0, 0.0))  # noqa: E731
        return OutboxStats(
            queued=get("queued")[0],
            accepted=get("accepted")[0],
            rejected=get("rejected")[0],
            duplicate=get("duplicate")[0],
            credit=sum(c for _, c in rows.values()),
        )

    def rows(self) -> list[dict[str, object]]:
        """Every trace's state (for the wallet's pending view and for tests)."""
        with self._lock:
            cur = self._db.execute(
                "SELECT trace_id, task_id, sample_index, passed, state, status, reason, credit FROM traces"
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
