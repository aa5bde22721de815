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
