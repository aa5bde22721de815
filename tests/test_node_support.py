"""Helpers for the node tests: a real node on loopback, a signing HTTP client, hand-made traces.

No tests here; the test_node_*.py files use these. Everything is real: uvicorn on 127.0.0.1 on a free
port, httpx, SQLite files under tmp_path, Ed25519 keys from wallet/, tasks and verdicts from verifier/.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from network.config import NodeConfig
from network.server import NodeServer
from protocol import AUTH_HEADERS, Lease, SignedTrace, Task, Trace, Verdict, request_signing_bytes
from wallet.identity import Identity
from wallet.signing import request_headers, sign_trace

MODEL_FILENAME = "tiny-test-model.Q4_0.gguf"
#: a little over two read chunks, so downloads stream several pieces
MODEL_BYTES = (2 << 20) + 12345


def write_model_file(folder: Path) -> Path:
    """A stand-in GGUF file with random bytes (the node serves any file it is told to accept)."""
    path = folder / MODEL_FILENAME
    path.write_bytes(b"GGUF" + os.urandom(MODEL_BYTES - 4))
    return path


@contextmanager
def running_node(db: Path, model: Path, config: NodeConfig | None = None) -> Iterator[str]:
    server = NodeServer(db, model_files={model.name: model}, config=config)
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


class Signer:
    """An httpx client that signs its requests with one identity, as the real client does."""

    def __init__(self, base_url: str, identity: Identity | None = None) -> None:
        self.identity = identity or Identity.generate()
        self.http = httpx.Client(base_url=base_url, timeout=60.0)

    @property
    def key(self) -> str:
        return self.identity.public_key_hex

    def close(self) -> None:
        self.http.close()

    def post(self, path: str, payload: Any = None, *, body: bytes | None = None) -> httpx.Response:
        data = body if body is not None else json.dumps(payload).encode()
        return self.http.post(path, content=data, headers=self.headers("POST", path, data))

    def headers(self, method: str, path: str, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
        if timestamp is None:
            return {"Content-Type": "application/json", **request_headers(self.identity, method, path, body)}
        nonce = os.urandom(16).hex()
        sig = self.identity.sign(request_signing_bytes(method, path, timestamp, nonce, body))
        return {
            "Content-Type": "application/json",
            AUTH_HEADERS["key"]: self.key,
            AUTH_HEADERS["timestamp"]: str(timestamp),
            AUTH_HEADERS["nonce"]: nonce,
            AUTH_HEADERS["signature"]: sig.hex(),
        }

    def lease(self, model_sha256: str, count: int = 2) -> Lease:
        resp = self.post("/v1/leases", {"count": count, "model_sha256": model_sha256})
        assert resp.status_code == 200, resp.text
        return Lease.model_validate(resp.json())

    def upload(self, *traces: SignedTrace) -> list[dict[str, Any]]:
        resp = self.post("/v1/traces", {"traces": [t.model_dump(mode="json") for t in traces]})
        assert resp.status_code == 200, resp.text
        receipts: list[dict[str, Any]] = resp.json()["receipts"]
        return receipts

    def balance(self, limit: int = 50) -> dict[str, Any]:
        resp = self.http.get(f"/v1/contributors/{self.key}/balance", params={"limit": limit})
        assert resp.status_code == 200, resp.text
        data: dict[str, Any] = resp.json()
        return data


def gold_answer(task: Task) -> str:
    """The task's gold answer, rebuilt from its coordinates the way the verifier does."""
    from verifier.gym import rebuild_entry

    data = task.verifier_data
    return str(rebuild_entry(task.family, data["seed"], data["index"])["answer"])


def completion_with(answer: str, thinking: str = "I work it out step by step.") -> str:
    return f"<think>{thinking}</think>\n<answer>{answer}</answer>"


def make_trace(
    identity: Identity,
    lease: Lease,
    task: Task,
    completion: str,
    *,
    sample_index: int = 0,
    verdict: Verdict | None = None,
    **overrides: Any,
) -> SignedTrace:
    """A signed trace for ``task`` of ``lease``; its verdict is the local verifier's unless given."""
    import verifier

    fields: dict[str, Any] = {
        "lease_id": lease.lease_id,
        "task_id": task.task_id,
        "sample_index": sample_index,
        "contributor": identity.public_key_hex,
        "model_sha256": lease.model_sha256,
        "seed": lease.seed,
        "completion": completion,
        "token_ids": [1, 2, 3],
        "logprobs": [-0.5, -0.25, -0.125],
        "prompt_tokens": 42,
        "finish_reason": "stop",
        "verdict": verdict or verifier.verify(task, completion),
        "created_at": time.time(),
    }
    fields.update(overrides)
    return sign_trace(identity, Trace(**fields))
