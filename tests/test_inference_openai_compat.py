"""Chat through an OpenAI-compatible server. Ollama cannot run here, so a tiny fake server on loopback,
started by the test, stands in for it: it speaks the same /v1/models and streamed /v1/chat/completions."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from inference.errors import BackendError
from inference.openai_compat import CONTRIBUTING_NEEDS_BUILTIN, OpenAICompatChat

WORDS = ["Hello", ", ", "I am", " a fake", " Ollama", "."]


class FakeOllama:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(200, json.dumps({"object": "list", "data": [{"id": "smollm2:135m"}]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.bodies.append(body)
                if body["model"] != "smollm2:135m":
                    self._send(
                        404, json.dumps({"error": {"message": f"model '{body['model']}' not found"}}).encode()
                    )
                    return
                words = WORDS[: body.get("max_tokens", 99)]
                reason = "length" if len(words) < len(WORDS) else "stop"
                events = [
                    {"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in words
                ]
                events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
                stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                self._send(200, stream.encode(), "text/event-stream")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    server = FakeOllama()
    yield server
    server.stop()


def test_chat_streams_the_reply(ollama: FakeOllama) -> None:
    pieces: list[str] = []
    with OpenAICompatChat(ollama.base_url) as chat:
        assert chat.models() == ["smollm2:135m"]
        reply = chat.chat(
            [{"role": "user", "content": "hi"}], temperature=0.2, on_text=lambda i, t: pieces.append(t)
        )
    assert reply.text == "".join(WORDS) == "".join(pieces)
    assert reply.finish_reason == "stop" and reply.token_ids == []
    sent = ollama.bodies[-1]
    assert sent["stream"] is True and sent["temperature"] == 0.2 and sent["messages"][0]["content"] == "hi"


def test_length_finish_and_cancel(ollama: FakeOllama) -> None:
    with OpenAICompatChat(ollama.base_url, model="smollm2:135m") as chat:
        assert chat.chat([{"role": "user", "content": "hi"}], max_tokens=2).finish_reason == "length"
        cancel = threading.Event()
        reply = chat.chat(
            [{"role": "user", "content": "hi"}], on_text=lambda i, t: cancel.set(), cancel=cancel
        )
    assert reply.finish_reason == "cancelled" and reply.text == WORDS[0]


def test_errors_are_clear(ollama: FakeOllama) -> None:
    with (
        OpenAICompatChat(ollama.base_url, model="nope") as chat,
        pytest.raises(BackendError, match="not found"),
    ):
        chat.chat([{"role": "user", "content": "hi"}])
    url = ollama.base_url
    ollama.stop()
    with OpenAICompatChat(url) as chat, pytest.raises(BackendError, match="is it running"):
        chat.models()


def test_it_cannot_contribute() -> None:
    assert OpenAICompatChat.can_contribute is False
    assert "built-in engine" in CONTRIBUTING_NEEDS_BUILTIN
