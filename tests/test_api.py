"""The node client's error tree, against the real node where it can produce the case."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from client.api import NetworkError, NodeClient, NodeRefused, ProtocolError


def test_refusals_from_the_real_node_carry_its_code(tracemill_home: Path, node_url: str) -> None:
    from client.paths import Paths
    from client.session import open_identity

    identity, _ = open_identity(Paths(tracemill_home))
    with NodeClient(node_url, identity) as node:
        node.register()
        with pytest.raises(NodeRefused) as refused:
            node.lease(1, "0" * 64)
    assert refused.value.code == "unknown_model"
    assert refused.value.status == 400


def test_an_unreachable_node_is_a_network_error() -> None:
    with (
        NodeClient("http://127.0.0.1:9", timeout=2) as node,
        pytest.raises(NetworkError, match="cannot reach"),
    ):
        node.models()


# The real node never sends malformed answers, so a stand-in transport plays a broken or hostile one.
def broken_node(body: bytes, status: int = 200) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(status, content=body)))


def test_malformed_answers_are_protocol_errors() -> None:
    with NodeClient("http://node", http=broken_node(b"<html>not json</html>")) as node, \
            pytest.raises(ProtocolError, match="not JSON"):
        node.info()
    with NodeClient("http://node", http=broken_node(b'[{"name": "x"}]')) as node, \
            pytest.raises(ProtocolError, match="malformed model list"):
        node.models()


def test_an_error_without_an_error_body_is_still_a_refusal() -> None:
    with NodeClient("http://node", http=broken_node(b"Bad Gateway", status=502)) as node, \
            pytest.raises(NodeRefused) as refused:
        node.models()
    assert refused.value.status == 502 and refused.value.code == "http_error"
