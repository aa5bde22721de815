"""Run a node in a background thread: the embedded local node, tests and ``tracemill node`` all use it."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import uvicorn

from network.app import create_app
from network.config import NodeConfig
from protocol import AcceptedModel

__all__ = ["NodeServer"]

log = logging.getLogger(__name__)


class NodeServer:
    """A node on ``host:port`` (port 0 picks a free port) serving the SQLite file ``db_path``."""

    def __init__(
        self,
        db_path: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_files: Mapping[str, str | Path] | None = None,
        config: NodeConfig | None = None,
        access_log: bool = False,
    ) -> None:
        self.db_path = Path(db_path)
        self.host = host
        self.port = port
        self.model_files = model_files
        self.config = config or NodeConfig()
        self.access_log = access_log
        self.base_url: str | None = None
        #: what /v1/models lists, once started
        self.accepted_models: list[AcceptedModel] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = 30.0) -> str:
        """Bind, serve in a thread, and return the base URL once ``/v1/info`` answers."""
        if self._thread is not None:
            raise RuntimeError("this node is already running")
        app = create_app(self.db_path, model_files=self.model_files, config=self.config)
        self.accepted_models = [m.info for m in app.state.node.models.values()]
        sock = _bind(self.host, self.port)
        bound_port = sock.getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.base_url = f"http://{host}:{bound_port}"
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=self.access_log,
            timeout_graceful_shutdown=5,
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, args=(sock,), name="tracemill-node", daemon=True)
        self._thread.start()
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        log.info("node serving %s at %s", self.db_path, self.base_url)
        return self.base_url

    def _run(self, sock: socket.socket) -> None:
        assert self._server is not None
        try:
            self._server.run(sockets=[sock])
        except BaseException as exc:  # reported by start() or stop()
            self._error = exc
            log.exception("the node stopped with an error")
        finally:
            sock.close()

    def _wait_ready(self, timeout: float) -> None:
        assert self._server is not None and self._thread is not None
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the node did not start: {self._error or 'timed out'}")
            time.sleep(0.02)
        port = self.base_url.rsplit(":", 1)[1] if self.base_url else ""
        probe = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}.get(self.host)
        url = f"http://{probe}:{port}" if probe else self.base_url
        with httpx.Client(timeout=5.0) as http:
            resp = http.get(f"{url}/v1/info")
            resp.raise_for_status()

    @property
    def running(self) -> bool:
        """True while the server thread is serving."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for the thread to end (open downloads get a few seconds to finish)."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        self._thread = None
        self._server = None

    def __enter__(self) -> NodeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
