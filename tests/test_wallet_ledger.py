"""The ledger cache: the node's totals win, history keeps every rejection's reason, days add up, CSV."""

from __future__ import annotations

import csv
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from protocol import Balance, LedgerEntry
from wallet.identity import Identity
from wallet.ledger import MIGRATIONS, LedgerCache

ME = Identity.generate().public_key_hex
OTHER = Identity.generate().public_key_hex
DAY1 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC).timestamp()
DAY2 = datetime(2026, 3, 2, 23, 30, tzinfo=UTC).timestamp()


def entry(i: int, status: str, amount: float, when: float, reason: str = "", who: str = ME) -> LedgerEntry:
    return LedgerEntry(entry_id=i, contributor=who, trace_id=f"{i:064x}", task_id=f"task-{i}",
                       status=status, amount=amount, reason=reason, created_at=when)  # type: ignore[arg-type]


def balance(entries: list[LedgerEntry], total: float, accepted: int, rejected: int) -> Balance:
    return Balance(contributor=ME, balance=total, accepted=accepted, rejected=rejected, entries=entries)


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[LedgerCache]:
    c = LedgerCache.in_wallet(tmp_path / "wallet")
    yield c
    c.close()


def test_schema_is_versioned(cache: LedgerCache, tmp_path: Path) -> None:
    assert cache.schema_version == MIGRATIONS[-1][0]
    cache.close()
    db = sqlite3.connect(tmp_path / "wallet" / "ledger.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(RuntimeError, match="newer Tracemill"):
        LedgerCache.in_wallet(tmp_path / "wallet")


def test_sync_keeps_the_nodes_totals_and_every_rejection_reason(cache: LedgerCache) -> None:
    first = [entry(1, "accepted", 1.0, DAY1), entry(2, "rejected", 0.0, DAY1, "wrong answer")]
    assert cache.sync(balance(first, 1.0, 1, 1), network="http://n", now=DAY1) == 2
    second = [*first, entry(3, "rejected", 0.0, DAY2, "replay gap 12.0 at token 7"),
              entry(4, "accepted", 2.5, DAY2)]
    assert cache.sync(balance(second, 3.5, 2, 2), network="http://n", now=DAY2) == 2
    assert cache.sync(balance(second, 3.5, 2, 2), network="http://n", now=DAY2) == 0
    s = cache.summary(ME, network="http://n", pending=3)
    assert (s.confirmed_balance, s.accepted, s.rejected, s.pending, s.synced_at) == (3.5, 2, 2, 3, DAY2)
    assert s.history_complete
    rejected = cache.history(ME, network="http://n", status="rejected")
    assert [e.reason for e in rejected] == ["replay gap 12.0 at token 7", "wrong answer"]
    assert cache.rejection_reasons(ME, network="http://n") == [
        ("replay gap 12.0 at token 7", 1), ("wrong answer", 1)]
    # Another network's cache is separate; an unknown one has never been synced.
    assert cache.summary(ME, network="http://other").synced_at is None


def test_the_node_is_the_source_of_truth(cache: LedgerCache) -> None:
    cache.sync(balance([entry(1, "accepted", 1.0, DAY1), entry(2, "accepted", 1.0, DAY1)], 2.0, 2, 0))
    # The node's ledger was reset: fewer entries than the cache holds, different traces.
    cache.sync(balance([entry(1, "rejected", 0.0, DAY2, "bad format")], 0.0, 0, 1))
    assert [e.status for e in cache.history(ME)] == ["rejected"]
    assert cache.summary(ME).confirmed_balance == 0.0
    # Entries for another contributor are never filed under this wallet.
    cache.sync(balance([entry(5, "accepted", 9.0, DAY2, who=OTHER)], 0.0, 0, 1))
    assert len(cache.history(ME)) == 1 and cache.history(OTHER) == []


def test_partial_history_is_flagged(cache: LedgerCache) -> None:
    cache.sync(balance([entry(10, "accepted", 1.0, DAY1)], 10.0, 10, 0))
    assert not cache.summary(ME).history_complete


def test_earnings_per_day_and_csv(cache: LedgerCache, tmp_path: Path) -> None:
    cache.sync(balance([
        entry(1, "accepted", 1.0, DAY1), entry(2, "rejected", 0.0, DAY1, "=HYPERLINK(\"x\")"),
        entry(3, "accepted", 2.0, DAY2), entry(4, "accepted", 0.5, DAY2 + 60),
    ], 3.5, 3, 1))
    days = cache.earnings_per_day(ME, tz=UTC)
    assert [(d.day, d.credited, d.accepted, d.rejected) for d in days] == [
        ("2026-03-01", 1.0, 1, 1), ("2026-03-02", 2.5, 2, 0)]
    out = tmp_path / "export" / "earnings.csv"
    assert cache.export_csv(out, ME) == 4
    rows = list(csv.DictReader(out.open()))
    assert [r["entry_id"] for r in rows] == ["1", "2", "3", "4"]
    assert rows[0]["time_utc"] == "2026-03-01T10:00:00Z" and rows[0]["amount"] == "1.0"
    assert rows[1]["status"] == "rejected" and rows[1]["reason"] == "'=HYPERLINK(\"x\")"
    assert sum(float(r["amount"]) for r in rows) == 3.5
