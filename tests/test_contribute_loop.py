"""The loop in process: nothing signed is lost when the node goes away, and a resumed node credits it."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.api import NodeClient
from client.contribute import ContributionLoop, LoopEvent
from client.outbox import Outbox
from client.paths import Paths
from client.session import open_identity

pytestmark = pytest.mark.model


def test_traces_signed_while_the_node_is_down_are_kept_and_uploaded_later(
    tmp_path: Path, tracemill_home: Path, default_model_path: Path
) -> None:
    from inference.default_model import DEFAULT_MODEL_FILENAME
    from inference.engine import Engine
    from network.server import NodeServer
    from verifier import verify

    db = tmp_path / "node.sqlite"
    files = {DEFAULT_MODEL_FILENAME: default_model_path}
    server = NodeServer(db, model_files=files)
    url = server.start()
    paths = Paths(tracemill_home).ensure()
    identity, _ = open_identity(paths)
    node = NodeClient(url, identity)
    node.register()
    model = node.models()[0]
    lease = node.lease(1, model.sha256)
    server.stop()  # the node goes down before anything is uploaded

    events: list[LoopEvent] = []
    engine = Engine(default_model_path)
    outbox = Outbox(paths.outbox_db)
    loop = ContributionLoop(node, identity, engine, model.sha256, outbox, verify=verify,
                            on_event=events.append)
    try:
        signed = loop.contribute_task(lease, lease.tasks[0])
        loop.flush(final=True, attempts=2)
    finally:
        engine.close()
    assert len(signed) == lease.tasks[0].group_size
    assert outbox.stats().queued == len(signed)
    assert any(e.kind == "upload_failed" for e in events)

    server = NodeServer(db, model_files=files)  # the node comes back, same database
    try:
        loop.node = NodeClient(server.start(), identity)
        loop.flush(final=True)
        stats = outbox.stats()
        assert stats.queued == 0
        assert stats.accepted + stats.rejected == len(signed)
        balance = loop.node.balance()
        assert balance.accepted == stats.accepted
        assert balance.balance == pytest.approx(stats.credit)
    finally:
        server.stop()
        outbox.close()


def test_traces_the_node_gives_no_receipt_for_stay_queued_and_the_flush_ends(tmp_path: Path) -> None:
    """A node that answers for only part of a batch (the real node never does: a stand-in transport
    plays a faulty one) must not make the client resend forever or drop the unanswered traces."""
    import httpx

    from protocol import BatchReceipt, Receipt
    from tests.test_outbox import make_signed

    traces = [make_signed(i) for i in range(3)]
    first = traces[0].trace.trace_id

    def answer(request: httpx.Request) -> httpx.Response:
        body = BatchReceipt(receipts=[Receipt(trace_id=first, status="accepted", credit=1.1)])
        return httpx.Response(200, content=body.model_dump_json())

    outbox = Outbox(tmp_path / "outbox.sqlite")
    outbox.add(traces)
    from wallet.identity import Identity

    node = NodeClient("http://node", Identity.generate(),
                      http=httpx.Client(transport=httpx.MockTransport(answer)))
    events: list[LoopEvent] = []
    loop = ContributionLoop(node, None, None, "ab" * 32, outbox,  # type: ignore[arg-type]
                            verify=lambda task, text: None, on_event=events.append)  # type: ignore[arg-type,return-value]
    loop.flush(final=True)
    stats = outbox.stats()
    assert (stats.accepted, stats.queued) == (1, 2)
    assert loop.summary.credits == pytest.approx(1.1)
    assert events[-1].kind == "upload_failed" and "no receipt for 2 traces" in events[-1].message
