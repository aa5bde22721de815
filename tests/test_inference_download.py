"""Model downloads against a real HTTP server on 127.0.0.1 that supports Range and can drop connections."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from inference.errors import ChecksumMismatchError, DownloadError
from inference.models import DownloadCancelled, ModelStore, download_file, sha256_file

DATA = os.urandom(3 * 1024 * 1024 + 123)
SHA = hashlib.sha256(DATA).hexdigest()
ETAG = f'"{SHA}"'


class FileServer:
    """Serves DATA at /model.gguf with Range/If-Range; while ``drop_after`` is set, the next response is
    cut off after that many body bytes (the connection is closed mid-body)."""

    def __init__(self) -> None:
        self.drop_after: int | None = None
        self.requests: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append({k.lower(): v for k, v in self.headers.items()})
                start, status = 0, 200
                rng = self.headers.get("Range")
                if rng and self.headers.get("If-Range", ETAG) == ETAG:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(DATA):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(DATA)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                body = DATA[start:]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", ETAG)
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")
                self.end_headers()
                if server.drop_after is not None:
                    cut, server.drop_after = server.drop_after, None
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/model.gguf"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FileServer]:
    with FileServer() as s:
        yield s


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def test_a_download_cut_in_the_middle_resumes_to_the_right_sha256(
    server: FileServer, http: httpx.Client, tmp_path: Path
) -> None:
    server.drop_after = 1_000_000
    dest = tmp_path / "model.gguf"
    seen: list[tuple[int, int]] = []
    # retries=0: the first attempt fails and leaves its .part behind, as a crashed app would.
    with pytest.raises(DownloadError, match="resume"):
        download_file(http, server.url, dest, sha256=SHA, size=len(DATA), retries=0)
    part = tmp_path / "model.gguf.part"
    assert part.stat().st_size == 1_000_000 and not dest.exists()

    download_file(
        http, server.url, dest, sha256=SHA, size=len(DATA), progress=lambda d, t: seen.append((d, t))
    )
    assert sha256_file(dest) == SHA
    assert not part.exists()
    assert server.requests[-1]["range"] == "bytes=1000000-"
    assert server.requests[-1]["if-range"] == ETAG
    assert seen[0][0] > 1_000_000 and seen[-1] == (len(DATA), len(DATA))


def test_a_dropped_connection_is_retried_within_one_call(
    server: FileServer, http: httpx.Client, tmp_path: Path
) -> None:
    server.drop_after = 500_000
    dest = download_file(http, server.url, tmp_path / "m.gguf", sha256=SHA, size=len(DATA))
    assert dest.read_bytes() == DATA
    assert [r.get("range") for r in server.requests] == [None, "bytes=500000-"]


def test_a_wrong_checksum_is_refused_and_nothing_is_kept(
    server: FileServer, http: httpx.Client, tmp_path: Path
) -> None:
    dest = tmp_path / "m.gguf"
    with pytest.raises(ChecksumMismatchError, match="does not match"):
        download_file(http, server.url, dest, sha256="0" * 64, size=len(DATA))
    assert list(tmp_path.iterdir()) == []


def test_a_changed_file_on_the_server_restarts_the_download(
    server: FileServer, http: httpx.Client, tmp_path: Path
) -> None:
    dest = tmp_path / "m.gguf"
    (tmp_path / "m.gguf.part").write_bytes(b"x" * 1000)  # left by a download of another version
    (tmp_path / "m.gguf.part.json").write_text('{"etag": "\\"old\\""}')
    download_file(http, server.url, dest, sha256=SHA, size=len(DATA))
    assert dest.read_bytes() == DATA


def test_cancel_keeps_the_part_for_later(server: FileServer, http: httpx.Client, tmp_path: Path) -> None:
    cancel = threading.Event()
    with pytest.raises(DownloadCancelled):
        download_file(
            http,
            server.url,
            tmp_path / "m.gguf",
            sha256=SHA,
            size=len(DATA),
            progress=lambda d, t: cancel.set(),
            cancel=cancel,
        )
    assert (tmp_path / "m.gguf.part").stat().st_size > 0
    download_file(http, server.url, tmp_path / "m.gguf", sha256=SHA, size=len(DATA))
    assert server.requests[-1]["range"].startswith("bytes=")


def test_store_lists_verifies_and_removes(server: FileServer, http: httpx.Client, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "models")
    assert store.installed() == []
    path = store.download("m.gguf", server.url, sha256=SHA, size=len(DATA), http=http)
    [only] = store.installed()
    assert only.path == path and only.sha256 == SHA and only.size == len(DATA)
    assert store.verified_path("m.gguf", SHA, len(DATA)) == path
    n = len(server.requests)
    store.download("m.gguf", server.url, sha256=SHA, size=len(DATA), http=http)
    assert len(server.requests) == n  # already there and verified: no new request
    other = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(ChecksumMismatchError):
        store.verified_path("m.gguf", other, len(DATA))
    assert store.remove("m.gguf") and store.installed() == [] and not store.remove("m.gguf")
    with pytest.raises(DownloadError):
        store.path_for("../evil.gguf")


@pytest.mark.model
def test_download_from_the_real_node(node_url: str, tmp_path: Path) -> None:
    from client.api import NodeClient
    from inference.models import download_model

    with NodeClient(node_url) as node:
        [model] = node.models()
        path = download_model(model, node.absolute_url(model.url), tmp_path, http=node.http)
    assert path.stat().st_size == model.size
    assert ModelStore(tmp_path).installed()[0].sha256 == model.sha256
