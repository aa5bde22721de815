"""Chat through a server the user already runs (Ollama, LM Studio, llama-server): the OpenAI chat API.

Only chat can use it. Contributing needs the built-in engine, because a trace must be sampled with the
network's replayable seeded sampler and carry its token ids and logprobs, which such servers do not give.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import httpx

from inference.engine import Sample
from inference.errors import BackendError

__all__ = ["OpenAICompatChat", "CONTRIBUTING_NEEDS_BUILTIN"]

log = logging.getLogger(__name__)

CONTRIBUTING_NEEDS_BUILTIN = (
    "Contributing needs the built-in engine: the network replays each trace with its own seeded sampler, "
    "which an external chat server cannot run. Chat keeps using your server; switch the engine to "
    "'builtin' in Settings to contribute."
)


class _Cancel(Protocol):
    def is_set(self) -> bool: ...


class OpenAICompatChat:
    """A chat backend over ``{base_url}/chat/completions`` (e.g. ``http://127.0.0.1:11434/v1`` for Ollama)."""

    can_contribute = False

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        http: httpx.Client | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._own_http = http is None
        self.http = http or httpx.Client(timeout=timeout, headers=headers)

    def close(self) -> None:
        if self._own_http:
            self.http.close()

    def __enter__(self) -> OpenAICompatChat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def models(self) -> list[str]:
        """The model ids the server offers."""
        data = self._json("GET", "/models")
        try:
            return [str(m["id"]) for m in data["data"]]
        except (KeyError, TypeError) as exc:
            raise BackendError(
                f"{self.base_url}/models answered something that is not a model list."
            ) from exc

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        temperature: float = 0.7,
        top_p: float = 0.95,
        max_tokens: int = 512,
        stop: Sequence[str] | None = None,
        on_text: Callable[[int, str], None] | None = None,
        cancel: _Cancel | None = None,
    ) -> Sample:
        """One reply, streamed through ``on_text(0, delta)``; the same shape as ``Engine.chat``."""
        model = self.model or self._first_model()
        body: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in messages],
            "stream": True,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
        }
        if stop:
            body["stop"] = list(stop)
        text: list[str] = []
        finish = "stop"
        try:
            with self.http.stream("POST", self.base_url + "/chat/completions", json=body) as resp:
                if resp.status_code != 200:
                    resp.read()
                    raise BackendError(f"The chat server answered {resp.status_code}: {_error_text(resp)}")
                for line in resp.iter_lines():
                    if cancel is not None and cancel.is_set():
                        finish = "cancelled"
                        break
                    delta, reason = _parse_sse(line)
                    if delta:
                        text.append(delta)
                        if on_text is not None:
                            on_text(0, delta)
                    if reason:
                        finish = "length" if reason == "length" else "stop"
                    if line.strip() == "data: [DONE]":
                        break
        except httpx.TransportError as exc:
            raise BackendError(
                f"Cannot reach the chat server at {self.base_url} ({exc}); is it running?"
            ) from exc
        return Sample(index=0, text="".join(text), token_ids=[], logprobs=[], finish_reason=finish)  # type: ignore[arg-type]

    def _first_model(self) -> str:
        models = self.models()
        if not models:
            raise BackendError(f"The chat server at {self.base_url} has no models; pull or load one first.")
        self.model = models[0]
        return self.model

    def _json(self, method: str, path: str) -> Any:
        try:
            resp = self.http.request(method, self.base_url + path)
        except httpx.TransportError as exc:
            raise BackendError(
                f"Cannot reach the chat server at {self.base_url} ({exc}); is it running?"
            ) from exc
        if resp.status_code != 200:
            raise BackendError(f"The chat server answered {resp.status_code}: {_error_text(resp)}")
        try:
            return resp.json()
        except ValueError as exc:
            raise BackendError(f"{self.base_url}{path} did not answer JSON.") from exc


def _parse_sse(line: str) -> tuple[str, str | None]:
    """(text delta, finish reason) of one server-sent-events line of a streamed chat completion."""
    if not line.startswith("data:"):
        return "", None
    payload = line[5:].strip()
    if not payload or payload == "[DONE]":
        return "", None
    try:
        choice = json.loads(payload)["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        log.debug("ignoring a malformed stream line: %r", line[:200])
        return "", None
    delta = (choice.get("delta") or {}).get("content") or ""
    return str(delta), choice.get("finish_reason")


def _error_text(resp: httpx.Response) -> str:
    try:
        data = resp.json()
        err = data.get("error", data)
        return str(err.get("message", err) if isinstance(err, dict) else err)[:300]
    except ValueError:
        return resp.text[:300]
