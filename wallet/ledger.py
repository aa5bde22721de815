"""The local cache of the node's ledger (the node is the source of truth): confirmed balance, history with
the reason for every rejection, earnings per day, CSV export. One SQLite file in the wallet folder, WAL,
with its schema version in ``PRAGMA user_version`` and named migrations applied in order."""

from __future__ import annotations

import csv
import io
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from protocol import Balance, LedgerEntry
from wallet.files import atomic_write

__all__ = ["LEDGER_FILE", "MIGRATIONS", "DayEarnings", "WalletSummary", "LedgerCache"]

LEDGER_FILE = "ledger.sqlite"

#: (version, name, SQL). Append only; never edit a released step.
MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "balances and ledger entries",
        """
        CREATE TABLE balances (
            network     TEXT NOT NULL,
            contributor TEXT NOT NULL,
            balance     REAL NOT NULL,
            accepted    INTEGER NOT NULL,
            rejected    INTEGER NOT NULL,
            synced_at   REAL NOT NULL,
            PRIMARY KEY (network, contributor)
        );
        CREATE TABLE entries (
            network     TEXT NOT NULL,
            entry_id    INTEGER NOT NULL,
            contributor TEXT NOT NULL,
            trace_id    TEXT NOT NULL,
            task_id     TEXT NOT NULL,
            status      TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
            amount      REAL NOT NULL,
            reason      TEXT NOT NULL DEFAULT '',
            created_at  REAL NOT NULL,
            PRIMARY KEY (network, entry_id)
        );
        CREATE INDEX entries_by_contributor ON entries(network, contributor, created_at);
        """,
    ),
]


@dataclass(frozen=True)
class WalletSummary:
    """What the wallet tab and ``tracemill wallet show`` display."""

    contributor: str
    network: str
    confirmed_balance: float
    accepted: int
    rejected: int
    pending: int  # uploaded or queued, not yet receipted (from the client's outbox)
    synced_at: float | None  # None: never synced with this network
    cached_entries: int

    @property
    def history_complete(self) -> bool:
        """False when the node has more ledger entries than the cache has seen."""
        return self.cached_entries >= self.accepted + self.rejected


@dataclass(frozen=True)
class DayEarnings:
    day: str  # YYYY-MM-DD in the chosen time zone
    credited: float
    accepted: int
    rejected: int


class LedgerCache:
    """The ledger cache at ``path`` (created and upgraded on open). Safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._migrate()

    @classmethod
    def in_wallet(cls, wallet_dir: Path) -> LedgerCache:
        return cls(Path(wallet_dir) / LEDGER_FILE)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> LedgerCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

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
        current = self.schema_version
        newest = MIGRATIONS[-1][0]
        if current > newest:
            raise RuntimeError(f"{self.path} was written by a newer Tracemill (schema {current}); update it.")
        for version, _name, sql in MIGRATIONS:
            if version <= current:
                continue
            with self._tx() as db:
                for statement in sql.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {int(version)}")

    def sync(self, balance: Balance, *, network: str = "", now: float | None = None) -> int:
        """Take in a balance answer from the node; returns how many entries were new to the cache.

        The node's totals replace the cached ones. When the node has fewer entries than the cache (its
        ledger was reset), the cached history for that network and contributor is dropped first.
        """
        now = time.time() if now is None else now
        key = (network, balance.contributor)
        with self._tx() as db:
            cached = db.execute(
                "SELECT COUNT(*) FROM entries WHERE network=? AND contributor=?", key
            ).fetchone()[0]
            if cached > balance.accepted + balance.rejected:
                db.execute("DELETE FROM entries WHERE network=? AND contributor=?", key)
            db.execute(
                "INSERT OR REPLACE INTO balances VALUES (?, ?, ?, ?, ?, ?)",
                (*key, balance.balance, balance.accepted, balance.rejected, now),
            )
            new = 0
            for e in balance.entries:
                if e.contributor != balance.contributor:
                    continue  # never file someone else's entry under this wallet
                row = db.execute(
                    "SELECT trace_id FROM entries WHERE network=? AND entry_id=?", (network, e.entry_id)
                ).fetchone()
                new += row is None or row[0] != e.trace_id
                db.execute(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (network, e.entry_id, e.contributor, e.trace_id, e.task_id, e.status, e.amount,
                     e.reason, e.created_at),
                )
        return new

    def summary(self, contributor: str, *, network: str = "", pending: int = 0) -> WalletSummary:
        """Confirmed totals from the last sync, plus ``pending`` (the outbox's un-receipted traces)."""
        with self._lock:
            row = self._db.execute(
                "SELECT balance, accepted, rejected, synced_at FROM balances "
                "WHERE network=? AND contributor=?",
                (network, contributor),
            ).fetchone()
            cached = self._db.execute(
                "SELECT COUNT(*) FROM entries WHERE network=? AND contributor=?", (network, contributor)
            ).fetchone()[0]
        balance, accepted, rejected, synced_at = row if row else (0.0, 0, 0, None)
        return WalletSummary(contributor, network, balance, accepted, rejected, max(0, pending), synced_at,
                             cached)

    def history(
        self, contributor: str, *, network: str = "", status: str | None = None, limit: int | None = None
    ) -> list[LedgerEntry]:
        """Cached ledger entries, newest first; ``status`` filters 'accepted' or 'rejected'."""
        sql = ("SELECT entry_id, contributor, trace_id, task_id, status, amount, reason, created_at "
               "FROM entries WHERE network=? AND contributor=?")
        params: list[object] = [network, contributor]
        if status is not None:
            sql += " AND status=?"
            params.append(status)
        sql += " ORDER BY created_at DESC, entry_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        names = ("entry_id", "contributor", "trace_id", "task_id", "status", "amount", "reason", "created_at")
        return [LedgerEntry(**dict(zip(names, r, strict=True))) for r in rows]

    def rejection_reasons(self, contributor: str, *, network: str = "") -> list[tuple[str, int]]:
        """Why work was rejected, most frequent first (an empty reason is shown as 'no reason given')."""
        with self._lock:
            rows = self._db.execute(
                "SELECT reason, COUNT(*) AS n FROM entries WHERE network=? AND contributor=? "
                "AND status='rejected' GROUP BY reason ORDER BY n DESC, reason",
                (network, contributor),
            ).fetchall()
        return [(r or "no reason given", int(n)) for r, n in rows]

    def earnings_per_day(
        self, contributor: str, *, network: str = "", tz: tzinfo | None = None
    ) -> list[DayEarnings]:
        """Credit and counts per calendar day (local time unless ``tz`` is given), oldest first."""
        days: dict[str, list[float]] = {}
        for e in reversed(self.history(contributor, network=network)):
            stamp = datetime.fromtimestamp(e.created_at, tz=tz or datetime.now().astimezone().tzinfo)
            acc = days.setdefault(stamp.strftime("%Y-%m-%d"), [0.0, 0, 0])
            acc[0] += e.amount if e.status == "accepted" else 0.0
            acc[1 if e.status == "accepted" else 2] += 1
        return [DayEarnings(d, round(v[0], 9), int(v[1]), int(v[2])) for d, v in sorted(days.items())]

    def export_csv(self, path: Path, contributor: str, *, network: str = "") -> int:
        """Write the cached history to ``path`` as CSV (atomically); returns the number of rows."""
        entries = list(reversed(self.history(contributor, network=network)))
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["entry_id", "time_utc", "status", "amount", "reason", "task_id", "trace_id"])
        for e in entries:
            when = datetime.fromtimestamp(e.created_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            writer.writerow([e.entry_id, when, e.status, repr(float(e.amount)), _cell(e.reason),
                             _cell(e.task_id), e.trace_id])
        atomic_write(Path(path), buf.getvalue().encode("utf-8"), mode=0o644)
        return len(entries)


def _cell(text: str) -> str:
    """Keep spreadsheet programs from running a node-supplied reason as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
