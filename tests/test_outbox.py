"""The outbox keeps every signed trace until the node's receipt, across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.outbox import Outbox, OutboxError
from protocol import Receipt, SignedTrace, Trace, Verdict


def make_signed(index: int, passed: bool = True) -> SignedTrace:
    trace = Trace(
        lease_id="lease-1",
        task_id="rg:chain_sum:1:0",
        sample_index=index,
        contributor="ab" * 32,
        model_sha256="cd" * 32,
        seed=7,
        completion=f"<answer>{index}</answer>",
        token_ids=[1, 2, 3],
        logprobs=[-0.1, -0.2, -0.3],
        prompt_tokens=12,
        verdict=Verdict(score=1.0 if passed else 0.0, passed=passed),
        created_at=1700000000.0 + index,
    )
    # The outbox stores what it is given; signatures are checked by the node (tests/test_node*).
    return SignedTrace(trace=trace, signature="00" * 64)


def test_traces_survive_a_restart_until_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "outbox.sqlite"
    box = Outbox(db)
    traces = [make_signed(i, passed=i % 2 == 0) for i in range(4)]
    assert box.add(traces) == 4
    box.close()  # as if the app crashed here

    box = Outbox(db)
    pending = box.pending()
    assert [t.trace.trace_id for t in pending] == [t.trace.trace_id for t in traces]
    assert pending[0] == traces[0]  # byte-for-byte the same signed trace
    box.acknowledge([
        Receipt(trace_id=traces[0].trace.trace_id, status="accepted", credit=1.1),
        Receipt(trace_id=traces[1].trace.trace_id, status="rejected", reason="verdict_mismatch"),
    ])
    stats = box.stats()
    assert (stats.queued, stats.accepted, stats.rejected) == (2, 1, 1)
    assert stats.credit == pytest.approx(1.1)
    assert {t.trace.trace_id for t in box.pending()} == {traces[2].trace.trace_id, traces[3].trace.trace_id}
    rows = {r["trace_id"]: r for r in box.rows()}
    assert rows[traces[1].trace.trace_id]["reason"] == "verdict_mismatch"


def test_adding_the_same_trace_twice_keeps_one(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite")
    t = make_signed(0)
    assert box.add([t]) == 1
    assert box.add([t]) == 0
    assert len(box.pending()) == 1


def test_failed_upload_keeps_traces_queued(tmp_path: Path) -> None:
    box = Outbox(tmp_path / "o.sqlite")
    t = make_signed(0)
    box.add([t])
    box.record_failure([t.trace.trace_id], "cannot reach the network node")
    assert box.pending() == [t]
    assert box.stats().queued == 1


def test_a_file_that_is_not_a_database_gives_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "outbox.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(OutboxError, match="damaged or not a database"):
        Outbox(bad)
    assert bad.read_bytes().startswith(b"this is not sqlite")  # nothing of the user's overwritten


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "o.sqlite"
    Outbox(db).close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 99")
    con.close()
    with pytest.raises(OutboxError, match="newer Tracemill"):
        Outbox(db)
