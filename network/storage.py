"""The node's SQLite database: contributors, nonces, leases, traces and the ledger.

WAL mode; every state change is one ``BEGIN IMMEDIATE`` transaction on a short-lived connection, so the
request threads never share a connection and a crash never leaves half a change behind.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from network.migrations import migrate
from protocol import Balance, Contributor, Lease, LedgerEntry, SignedTrace, Task

__all__ = ["LeaseRecord", "Status", "Storage", "StoredTrace"]

Status = Literal["accepted", "rejected"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseRecord:
    lease_id: str
    contributor: str
    model_sha256: str
    seed: int
    issued_at: float
    expires_at: float
    tasks: dict[str, Task]


@dataclass(frozen=True)
class StoredTrace:
    trace_id: str
    status: Status
    reason: str
    credit: float


class Storage:
    """One node database file. Safe to use from many threads: each call opens its own connection."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect()
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            applied = migrate(conn)
        finally:
            conn.close()
        if applied:
            log.info("node database %s: applied migrations %s", self.path, ", ".join(applied))

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = FULL")  # a receipt is only sent for a change on disk
        return conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    # -- schema ------------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._read() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def journal_mode(self) -> str:
        with self._read() as conn:
            return str(conn.execute("PRAGMA journal_mode").fetchone()[0])

    # -- contributors and nonces -------------------------------------------------------------------

    def register(self, public_key: str, now: float) -> Contributor:
        """Register a contributor (idempotent); returns it with its first registration time."""
        with self._transaction() as conn:
            return self._register(conn, public_key, now)

    @staticmethod
    def _register(conn: sqlite3.Connection, public_key: str, now: float) -> Contributor:
        conn.execute(
            "INSERT OR IGNORE INTO contributors (public_key, registered_at) VALUES (?, ?)", (public_key, now)
        )
        (registered_at,) = conn.execute(
            "SELECT registered_at FROM contributors WHERE public_key = ?", (public_key,)
        ).fetchone()
        return Contributor(public_key=public_key, registered_at=registered_at)

    def use_nonce(self, public_key: str, nonce: str, *, now: float, expires_at: float) -> bool:
        """Record a signed request's nonce and register its signer, in one transaction.

        Returns False (and changes nothing) when the nonce was seen before and has not expired.
        Expired nonces are purged first: their requests would be refused as stale anyway.
        """
        with self._transaction() as conn:
            conn.execute("DELETE FROM nonces WHERE expires_at < ?", (now,))
            try:
                conn.execute(
                    "INSERT INTO nonces (public_key, nonce, expires_at) VALUES (?, ?, ?)",
                    (public_key, nonce, expires_at),
                )
            except sqlite3.IntegrityError:
                return False
            self._register(conn, public_key, now)
            return True

    def nonce_count(self) -> int:
        with self._read() as conn:
            return int(conn.execute("SELECT count(*) FROM nonces").fetchone()[0])

    # -- leases ------------------------------------------------------------------------------------

    def add_lease(self, lease: Lease, task_seed: int) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO leases (lease_id, contributor, model_sha256, seed, task_seed, issued_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    lease.lease_id,
                    lease.contributor,
                    lease.model_sha256,
                    lease.seed,
                    task_seed,
                    lease.issued_at,
                    lease.expires_at,
                ),
            )
            conn.executemany(
                "INSERT INTO lease_tasks (lease_id, task_id, position, group_size, task_json)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (lease.lease_id, t.task_id, i, t.group_size, t.model_dump_json())
                    for i, t in enumerate(lease.tasks)
                ],
            )

    def get_lease(self, lease_id: str) -> LeaseRecord | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT contributor, model_sha256, seed, issued_at, expires_at"
                " FROM leases WHERE lease_id = ?",
                (lease_id,),
            ).fetchone()
            if row is None:
                return None
            tasks = conn.execute(
                "SELECT task_json FROM lease_tasks WHERE lease_id = ? ORDER BY position", (lease_id,)
            ).fetchall()
        parsed = [Task.model_validate_json(t) for (t,) in tasks]
        return LeaseRecord(
            lease_id=lease_id,
            contributor=row[0],
            model_sha256=row[1],
            seed=int(row[2]),
            issued_at=row[3],
            expires_at=row[4],
            tasks={t.task_id: t for t in parsed},
        )

    # -- traces and the ledger ---------------------------------------------------------------------

    def get_trace(self, trace_id: str) -> StoredTrace | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT status, reason, credit FROM traces WHERE trace_id = ?", (trace_id,)
            ).fetchone()
        return None if row is None else StoredTrace(trace_id, row[0], row[1], row[2])

    def sample_credited(self, lease_id: str, task_id: str, sample_index: int) -> bool:
        with self._read() as conn:
            row = conn.execute(
                "SELECT 1 FROM traces WHERE lease_id = ? AND task_id = ? AND sample_index = ?"
                " AND status = 'accepted'",
                (lease_id, task_id, sample_index),
            ).fetchone()
        return row is not None

    def record_trace(
        self,
        signed: SignedTrace,
        *,
        status: Status,
        reason: str,
        credit: float,
        node_score: float | None,
        now: float,
        already_credited: str = "sample_already_credited",
    ) -> StoredTrace | None:
        """Store a trace with its outcome and its ledger row, in one transaction.

        Returns None when a trace with this id is already stored (a concurrent duplicate). An accepted
        trace whose (lease, task, sample) was credited meanwhile is stored as rejected instead, with the
        reason ``already_credited``.
        """
        t = signed.trace
        trace_id = t.trace_id
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM traces WHERE trace_id = ?", (trace_id,)).fetchone():
                return None
            if (
                status == "accepted"
                and conn.execute(
                    "SELECT 1 FROM traces WHERE lease_id = ? AND task_id = ? AND sample_index = ?"
                    " AND status = 'accepted'",
                    (t.lease_id, t.task_id, t.sample_index),
                ).fetchone()
            ):
                status, reason, credit = "rejected", already_credited, 0.0
            self._register(conn, t.contributor, now)
            conn.execute(
                "INSERT INTO traces (trace_id, contributor, lease_id, task_id, sample_index, signed_json,"
                " status, reason, node_score, credit, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    trace_id,
                    t.contributor,
                    t.lease_id,
                    t.task_id,
                    t.sample_index,
                    signed.model_dump_json(),
                    status,
                    reason,
                    node_score,
                    credit,
                    now,
                ),
            )
            conn.execute(
                "INSERT INTO ledger (contributor, trace_id, task_id, status, amount, reason, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (t.contributor, trace_id, t.task_id, status, credit, reason, now),
            )
        return StoredTrace(trace_id, status, reason, credit)

    def balance(self, public_key: str, limit: int) -> Balance:
        """The contributor's balance and counts, with its newest ``limit`` ledger entries first."""
        with self._read() as conn:
            total, accepted, rejected = conn.execute(
                "SELECT coalesce(sum(amount), 0),"
                " coalesce(sum(status = 'accepted'), 0), coalesce(sum(status = 'rejected'), 0)"
                " FROM ledger WHERE contributor = ?",
                (public_key,),
            ).fetchone()
            rows = conn.execute(
                "SELECT entry_id, trace_id, task_id, status, amount, reason, created_at FROM ledger"
                " WHERE contributor = ? ORDER BY entry_id DESC LIMIT ?",
                (public_key, limit),
            ).fetchall()
        entries = [
            LedgerEntry(
                entry_id=r[0],
                contributor=public_key,
                trace_id=r[1],
                task_id=r[2],
                status=r[3],
                amount=r[4],
                reason=r[5],
                created_at=r[6],
            )
            for r in rows
        ]
        return Balance(
            contributor=public_key,
            balance=round(float(total), 9),
            accepted=int(accepted),
            rejected=int(rejected),
            entries=entries,
        )
