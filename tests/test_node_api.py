"""The node's HTTP API against a real node on loopback: info, model downloads with Range, leases,
request signing (nonces, timestamps, signatures) and error bodies."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from network.config import NodeConfig
from network.model_files import default_model_files
from protocol import AUTH_HEADERS, SCHEMA_VERSION, AcceptedModel, ErrorBody, sha256_hex
from tests.test_node_support import MODEL_BYTES, MODEL_FILENAME, Signer, running_node, write_model_file

CONFIG = NodeConfig(
    families=("chain_sum", "leg_counting"),
    group_size=3,
    max_tasks_per_lease=4,
    lease_seconds=600.0,
    max_body_bytes=64 * 1024,
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_file(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, model: Path) -> Iterator[str]:
    with running_node(tmp_path_factory.mktemp("node") / "node.sqlite", model, CONFIG) as base:
        yield base


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=60.0) as client:
        yield client


@pytest.fixture
def signer(url: str) -> Iterator[Signer]:
    s = Signer(url)
    yield s
    s.close()


def error(resp: httpx.Response) -> ErrorBody:
    return ErrorBody.model_validate(resp.json())


def test_info(http: httpx.Client) -> None:
    info = http.get("/v1/info").json()
    assert info["name"] == CONFIG.name
    assert info["schema_version"] == SCHEMA_VERSION
    assert isinstance(info["version"], str) and info["version"]


def test_models_lists_the_accepted_file(http: httpx.Client, model: Path) -> None:
    (m,) = [AcceptedModel.model_validate(x) for x in http.get("/v1/models").json()]
    assert m.filename == MODEL_FILENAME
    assert m.url == f"/v1/models/{MODEL_FILENAME}"
    assert m.size == MODEL_BYTES
    assert m.sha256 == sha256_hex(model.read_bytes())


def test_default_model_comes_from_the_models_dir(default_model_path: Path) -> None:
    from inference.default_model import DEFAULT_MODEL_FILENAME

    assert default_model_files(default_model_path.parent) == {DEFAULT_MODEL_FILENAME: default_model_path}


def test_full_download(http: httpx.Client, model: Path) -> None:
    resp = http.get(f"/v1/models/{MODEL_FILENAME}")
    assert resp.status_code == 200
    assert resp.headers["accept-ranges"] == "bytes"
    assert int(resp.headers["content-length"]) == MODEL_BYTES
    assert resp.content == model.read_bytes()


def test_partial_download_and_resume(http: httpx.Client, model: Path) -> None:
    data = model.read_bytes()
    first = http.get(f"/v1/models/{MODEL_FILENAME}", headers={"Range": "bytes=0-1048575"})
    assert first.status_code == 206
    assert first.headers["content-range"] == f"bytes 0-1048575/{MODEL_BYTES}"
    assert first.content == data[: 1 << 20]
    # resume where the first part stopped, the way a downloader with a .part file does
    rest = http.get(f"/v1/models/{MODEL_FILENAME}", headers={"Range": f"bytes={len(first.content)}-"})
    assert rest.status_code == 206
    assert rest.headers["content-range"] == f"bytes {1 << 20}-{MODEL_BYTES - 1}/{MODEL_BYTES}"
    assert first.content + rest.content == data
    tail = http.get(f"/v1/models/{MODEL_FILENAME}", headers={"Range": "bytes=-100"})
    assert tail.status_code == 206 and tail.content == data[-100:]
    past_end = http.get(f"/v1/models/{MODEL_FILENAME}", headers={"Range": f"bytes=10-{MODEL_BYTES + 50}"})
    assert past_end.status_code == 206 and past_end.content == data[10:]


def test_head_reports_size_without_a_body(http: httpx.Client) -> None:
    resp = http.head(f"/v1/models/{MODEL_FILENAME}")
    assert resp.status_code == 200
    assert int(resp.headers["content-length"]) == MODEL_BYTES
    assert resp.headers["accept-ranges"] == "bytes"
    assert resp.content == b""


@pytest.mark.parametrize("header", [f"bytes={MODEL_BYTES}-", "bytes=500-100", "bytes=0-1,5-9", "lines=1-2"])
def test_bad_range_is_416(http: httpx.Client, header: str) -> None:
    resp = http.get(f"/v1/models/{MODEL_FILENAME}", headers={"Range": header})
    assert resp.status_code == 416
    assert resp.headers["content-range"] == f"bytes */{MODEL_BYTES}"
    assert error(resp).code == "bad_range"


def test_if_range_with_a_stale_etag_gets_the_whole_file(http: httpx.Client) -> None:
    resp = http.get(f"/v1/models/{MODEL_FILENAME}", headers={"Range": "bytes=0-9", "If-Range": '"other"'})
    assert resp.status_code == 200 and len(resp.content) == MODEL_BYTES


def test_unknown_model_file_is_404(http: httpx.Client) -> None:
    resp = http.get("/v1/models/nope.gguf")
    assert resp.status_code == 404 and error(resp).code == "unknown_model"


def test_lease(signer: Signer, http: httpx.Client) -> None:
    from verifier.environments import make_task

    sha = http.get("/v1/models").json()[0]["sha256"]
    before = time.time()
    a = signer.lease(sha, count=3)
    b = signer.lease(sha, count=3)
    assert a.contributor == signer.key and a.model_sha256 == sha
    assert len(a.tasks) == 3
    assert a.lease_id != b.lease_id and a.seed != b.seed
    assert before <= a.issued_at and a.expires_at == pytest.approx(a.issued_at + CONFIG.lease_seconds)
    for task in a.tasks:
        assert task.family in CONFIG.families and task.group_size == CONFIG.group_size
        # the id and the content are the verifier's deterministic task for these coordinates
        data = task.verifier_data
        again = make_task(
            task.env, task.family, data["seed"], data["index"], group_size=3, sampling=CONFIG.sampling
        )
        assert again == task


def test_lease_count_is_capped(signer: Signer, http: httpx.Client) -> None:
    sha = http.get("/v1/models").json()[0]["sha256"]
    assert len(signer.lease(sha, count=30).tasks) == CONFIG.max_tasks_per_lease


def test_lease_for_an_unknown_model_is_refused(signer: Signer) -> None:
    resp = signer.post("/v1/leases", {"count": 1, "model_sha256": "ab" * 32})
    assert resp.status_code == 400 and error(resp).code == "unknown_model"


def test_register_is_idempotent(signer: Signer) -> None:
    first = signer.post("/v1/contributors", {})
    second = signer.post("/v1/contributors", body=b"")
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert first.json()["public_key"] == signer.key


def test_replayed_request_nonce_is_refused(signer: Signer) -> None:
    body = b"{}"
    headers = signer.headers("POST", "/v1/contributors", body)
    assert signer.http.post("/v1/contributors", content=body, headers=headers).status_code == 200
    again = signer.http.post("/v1/contributors", content=body, headers=headers)
    assert again.status_code == 401 and error(again).code == "replayed_nonce"


@pytest.mark.parametrize("offset", [-3600, 3600])
def test_stale_timestamp_is_refused(signer: Signer, offset: int) -> None:
    body = b"{}"
    headers = signer.headers("POST", "/v1/contributors", body, timestamp=int(time.time()) + offset)
    resp = signer.http.post("/v1/contributors", content=body, headers=headers)
    assert resp.status_code == 401 and error(resp).code == "stale_timestamp"


def test_bad_signatures_are_refused(signer: Signer, http: httpx.Client) -> None:
    sha = http.get("/v1/models").json()[0]["sha256"]
    body = json.dumps({"count": 1, "model_sha256": sha}).encode()
    headers = signer.headers("POST", "/v1/leases", body)
    tampered = body.replace(b'"count": 1', b'"count": 9')
    resp = signer.http.post("/v1/leases", content=tampered, headers=headers)
    assert resp.status_code == 401 and error(resp).code == "bad_signature"
    # a signature made for another path does not open this one
    headers = signer.headers("POST", "/v1/contributors", body)
    resp = signer.http.post("/v1/leases", content=body, headers=headers)
    assert resp.status_code == 401 and error(resp).code == "bad_signature"


def test_missing_auth_headers_are_refused(signer: Signer) -> None:
    body = b"{}"
    headers = signer.headers("POST", "/v1/contributors", body)
    del headers[AUTH_HEADERS["signature"]]
    resp = signer.http.post("/v1/contributors", content=body, headers=headers)
    assert resp.status_code == 401 and error(resp).code == "missing_auth"
    resp = signer.http.post("/v1/leases", content=body)
    assert resp.status_code == 401 and error(resp).code == "missing_auth"


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"count": 0, "model_sha256": "' + b"a" * 64 + b'"}',
        b'{"count": 1}',
        b'{"count": 1, "model_sha256": "' + b"a" * 64 + b'", "extra": 1}',
        b"[]",
    ],
)
def test_malformed_lease_request_is_422(signer: Signer, body: bytes) -> None:
    resp = signer.post("/v1/leases", body=body)
    assert resp.status_code == 422
    err = error(resp)
    assert err.code == "invalid_request" and err.message


def test_malformed_trace_batch_is_422(signer: Signer) -> None:
    resp = signer.post("/v1/traces", {"traces": [{"trace": {"lease_id": "x"}, "signature": "00"}]})
    assert resp.status_code == 422
    assert error(resp).code == "invalid_request"
    assert "traces.0" in error(resp).message


def test_oversized_body_is_413(signer: Signer) -> None:
    resp = signer.post("/v1/traces", body=b"x" * (CONFIG.max_body_bytes + 1))
    assert resp.status_code == 413 and error(resp).code == "body_too_large"
    # chunked, so the node only finds out while reading
    chunks = (b"x" * 1024 for _ in range(CONFIG.max_body_bytes // 1024 + 1))
    resp = signer.http.post("/v1/traces", content=chunks)
    assert "content-length" not in resp.request.headers
    assert resp.status_code == 413 and error(resp).code == "body_too_large"


def test_balance_of_an_unknown_contributor_is_empty(http: httpx.Client) -> None:
    resp = http.get(f"/v1/contributors/{'cd' * 32}/balance")
    assert resp.json() == {
        "contributor": "cd" * 32,
        "balance": 0.0,
        "accepted": 0,
        "rejected": 0,
        "entries": [],
    }


@pytest.mark.parametrize(
    "path", ["/v1/contributors/nothex/balance", f"/v1/contributors/{'cd' * 32}/balance?limit=-1"]
)
def test_bad_balance_queries_are_422(http: httpx.Client, path: str) -> None:
    resp = http.get(path)
    assert resp.status_code == 422 and error(resp).code == "invalid_request"


def test_unknown_route_has_an_error_body(http: httpx.Client) -> None:
    resp = http.get("/v1/nothing")
    assert resp.status_code == 404 and error(resp).code == "not_found"
