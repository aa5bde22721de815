"""The httpx client for a Tracemill network node (docs/protocol.md).

Callers may inject their own ``httpx.Client`` (a transport, proxies, timeouts). Every failure is one of
three exceptions, all subclasses of :class:`NodeError`:

- :class:`NetworkError`: the node could not be reached or did not answer in time;
- :class:`NodeRefused`: the node answered with an error body (``.code`` says which, ``.status``
  the HTTP status);
- :class:`ProtocolError`: the node answered something that is not valid protocol.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urljoin

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from protocol import (
    AcceptedModel,
    Balance,
    BatchReceipt,
    Contributor,
    ErrorBody,
    Lease,
    LeaseRequest,
    SignedTrace,
    TraceBatch,
)

if TYPE_CHECKING:
    from wallet.identity import Identity

__all__ = ["NodeClient", "NodeError", "NetworkError", "NodeRefused", "ProtocolError"]

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


class NodeError(Exception):
    """Base of every error talking to a node."""


class NetworkError(NodeError):
    """The node could not be reached, or the connection failed midway."""


class ProtocolError(NodeError):
    """The node's answer is not valid protocol."""


class NodeRefused(NodeError):
    """The node answered with an error body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} ({code}, HTTP {status})")
        self.status = status
        self.code = code
        self.message = message


class NodeClient:
    """One method per endpoint of a node. Authenticated calls need an identity."""

    def __init__(
        self,
        base_url: str,
        identity: Identity | None = None,
        *,
        http: httpx.Client | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.identity = identity
        self._owns_http = http is None
        self.http = http or httpx.Client(timeout=timeout)

    def close(self) -> None:
        if self._owns_http:
            self.http.close()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def absolute_url(self, url: str) -> str:
        """Resolve a URL the node gave (possibly relative, e.g. a model's) against its base URL."""
        return urljoin(self.base_url + "/", url)

    # -- endpoints -------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        data = self._request("GET", "/v1/info")
        if not isinstance(data, dict):
            raise ProtocolError("node info is not an object")
        return data

    def register(self) -> Contributor:
        return self._parse(Contributor, self._request("POST", "/v1/contributors", body={}, signed=True))

    def models(self) -> list[AcceptedModel]:
        data = self._request("GET", "/v1/models")
        try:
            return TypeAdapter(list[AcceptedModel]).validate_python(data)
        except ValidationError as exc:
            raise ProtocolError(f"malformed model list from the node: {_first_error(exc)}") from exc

    def lease(self, count: int, model_sha256: str) -> Lease:
        req = LeaseRequest(count=count, model_sha256=model_sha256)
        data = self._request("POST", "/v1/leases", body=req.model_dump(mode="json"), signed=True)
        return self._parse(Lease, data)

    def upload(self, traces: Sequence[SignedTrace]) -> BatchReceipt:
        batch = TraceBatch(traces=list(traces))
        data = self._request("POST", "/v1/traces", body=batch.model_dump(mode="json"), signed=True)
        receipt = self._parse(BatchReceipt, data)
        sent = {t.trace.trace_id for t in traces}
        got = {r.trace_id for r in receipt.receipts}
        if not got <= sent:
            raise ProtocolError("the node sent receipts for traces that were not in the batch")
        return receipt

    def balance(self, public_key: str | None = None, limit: int = 50) -> Balance:
        key = public_key or (self.identity.public_key_hex if self.identity else None)
        if key is None:
            raise ValueError("balance needs a public key or an identity")
        return self._parse(Balance, self._request("GET", f"/v1/contributors/{key}/balance?limit={limit}"))

    # -- plumbing --------------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, body: Any = None, signed: bool = False) -> Any:
        content = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if signed:
            if self.identity is None:
                raise ValueError(f"{method} {path} needs an identity to sign with")
            from wallet.signing import request_headers

            headers.update(request_headers(self.identity, method, path, content))
        try:
            resp = self.http.request(method, self.base_url + path, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise NetworkError(f"cannot reach the network node at {self.base_url}: {exc}") from exc
        if resp.status_code >= 400:
            raise _refusal(resp)
        try:
            return resp.json()
        except ValueError as exc:
            raise ProtocolError(f"{method} {path}: the node's answer is not JSON") from exc

    @staticmethod
    def _parse(model: type[M], data: Any) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise ProtocolError(f"malformed {model.__name__} from the node: {_first_error(exc)}") from exc


def _refusal(resp: httpx.Response) -> NodeRefused:
    try:
        body = ErrorBody.model_validate(resp.json())
        return NodeRefused(resp.status_code, body.code, body.message)
    except (ValueError, ValidationError):
        text = resp.text[:200].strip() or resp.reason_phrase
        return NodeRefused(resp.status_code, "http_error", text)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "body"
    return f"{where}: {err.get('msg', 'invalid')}"
