"""The node's HTTP API (docs/protocol.md): routes, body limits, signed requests, error bodies."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from network.auth import authenticate
from network.config import NodeConfig
from network.errors import NodeHTTPError
from network.intake import process_batch
from network.leases import check_families, issue_lease
from network.model_files import ModelFile, default_model_files, iter_file, load_models, parse_range
from network.storage import Storage
from protocol import (
    SCHEMA_VERSION,
    AcceptedModel,
    Balance,
    BatchReceipt,
    Contributor,
    ErrorBody,
    Lease,
    LeaseRequest,
    TraceBatch,
)

__all__ = ["Node", "create_app"]

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
_HEX64 = r"^[0-9a-f]{64}$"


@dataclass(frozen=True)
class Node:
    """What every route needs: the database, the settings and the accepted models."""

    storage: Storage
    config: NodeConfig
    models: dict[str, ModelFile]


def create_app(
    db_path: str | Path,
    *,
    model_files: Mapping[str, str | Path] | None = None,
    config: NodeConfig | None = None,
) -> FastAPI:
    """A node's FastAPI app over the SQLite file ``db_path`` (created and migrated as needed).

    ``model_files`` maps each accepted model's filename to its local path; None means the default model
    from ``TRACEMILL_MODELS_DIR`` when it is there.
    """
    config = config or NodeConfig()
    check_families(config)
    files = default_model_files() if model_files is None else dict(model_files)
    node = Node(storage=Storage(db_path), config=config, models=load_models(files))
    app = FastAPI(title="Tracemill network node", version=_version())
    app.state.node = node
    app.include_router(router)
    app.add_exception_handler(NodeHTTPError, _node_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
    return app


router = APIRouter(prefix="/v1")


def _node(request: Request) -> Node:
    node: Node = request.app.state.node
    return node


# -- public endpoints -----------------------------------------------------------------------------


@router.get("/info")
def info(request: Request) -> dict[str, Any]:
    node = _node(request)
    return {
        "name": node.config.name,
        "version": _version(),
        "schema_version": SCHEMA_VERSION,
        "db_schema_version": node.storage.schema_version(),
    }


@router.get("/models")
def list_models(request: Request) -> list[AcceptedModel]:
    return [m.info for m in _node(request).models.values()]


@router.api_route("/models/{filename}", methods=["GET", "HEAD"], response_model=None)
def download_model(filename: str, request: Request) -> Response:
    """The model file, whole (200) or one byte range (206); ``If-Range`` with a stale ETag gets it whole."""
    model = _node(request).models.get(filename)
    if model is None:
        raise NodeHTTPError(404, "unknown_model", f"this node serves no model file {filename!r}")
    size = model.info.size
    etag = f'"{model.info.sha256}"'
    headers = {"Accept-Ranges": "bytes", "ETag": etag, "Content-Type": "application/octet-stream"}
    wanted = request.headers.get("range")
    if_range = request.headers.get("if-range")
    if wanted is not None and (if_range is None or if_range.strip() == etag):
        try:
            rng = parse_range(wanted, size)
        except NodeHTTPError as exc:
            return _error_response(exc.status, exc.code, exc.message, {"Content-Range": f"bytes */{size}"})
        start, length, status = rng.start, rng.length, 206
        headers["Content-Range"] = f"bytes {rng.start}-{rng.end}/{size}"
    else:
        start, length, status = 0, size, 200
    headers["Content-Length"] = str(length)
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers)
    return StreamingResponse(iter_file(model.path, start, length), status_code=status, headers=headers)


@router.get("/contributors/{public_key}/balance")
def balance(
    request: Request,
    public_key: str,
    limit: int = Query(default=50, ge=0, le=1000, description="newest ledger entries to include"),
) -> Balance:
    if not re.fullmatch(_HEX64, public_key):
        raise NodeHTTPError(422, "invalid_request", "public_key must be 64 lower-case hex characters")
    return _node(request).storage.balance(public_key, min(limit, _node(request).config.max_balance_entries))


# -- signed endpoints -----------------------------------------------------------------------------


@router.post("/contributors")
async def register(request: Request) -> Contributor:
    node = _node(request)
    body = await _read_body(request, node.config.max_body_bytes)
    signer, now = await _authenticate(request, node, body)
    if body.strip():
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise NodeHTTPError(422, "invalid_request", "the body of POST /v1/contributors is empty or {}")
    return await run_in_threadpool(node.storage.register, signer, now)


@router.post("/leases")
async def lease(request: Request) -> Lease:
    node = _node(request)
    body = await _read_body(request, node.config.max_body_bytes)
    signer, now = await _authenticate(request, node, body)
    req = _parse(LeaseRequest, body)
    return await run_in_threadpool(issue_lease, node.storage, node.config, node.models, signer, req, now=now)


@router.post("/traces")
async def upload_traces(request: Request) -> BatchReceipt:
    node = _node(request)
    body = await _read_body(request, node.config.max_body_bytes)
    signer, now = await _authenticate(request, node, body)
    batch = _parse(TraceBatch, body)
    return await run_in_threadpool(process_batch, node.storage, node.config, signer, batch.traces, now=now)


# -- plumbing -------------------------------------------------------------------------------------


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) anything over ``limit`` bytes before reading all of it."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise NodeHTTPError(413, "body_too_large", f"request bodies are limited to {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise NodeHTTPError(413, "body_too_large", f"request bodies are limited to {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _authenticate(request: Request, node: Node, body: bytes) -> tuple[str, float]:
    """The signer of this request and the node's clock reading for it (see network.auth)."""
    path = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
    query = request.scope.get("query_string", b"")
    if query:
        path += "?" + query.decode("latin-1")
    now = time.time()
    signer = await run_in_threadpool(
        authenticate, node.storage, request.headers, request.method, path, body, now=now
    )
    return signer, now


def _parse(model: type[M], body: bytes) -> M:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise NodeHTTPError(422, "invalid_request", _describe(exc.errors())) from exc


def _describe(errors: Any) -> str:
    """A readable summary of pydantic/FastAPI validation errors: 'where: what' for the first few."""
    parts = []
    for err in list(errors)[:3]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid value')}")
    more = len(list(errors)) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        ErrorBody(code=code, message=message).model_dump(mode="json"), status_code=status, headers=headers
    )


async def _node_error(request: Request, exc: NodeHTTPError) -> JSONResponse:
    return _error_response(exc.status, exc.code, exc.message)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    return _error_response(422, "invalid_request", _describe(exc.errors()))


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return _error_response(exc.status_code, code, str(exc.detail), getattr(exc, "headers", None))


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("internal error on %s %s", request.method, request.url.path)
    return _error_response(500, "internal_error", "the node failed on this request; it has been logged")


def _version() -> str:
    try:
        return metadata.version("tracemill")
    except metadata.PackageNotFoundError:
        return "0.1.0"
