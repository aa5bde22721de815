"""`tracemill node`: run a reference network node in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["register", "run_node"]


def register(sub: Any) -> None:
    p = sub.add_parser("node", help="run a network node (task board, trace intake, ledger) until Ctrl-C")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8470, help="port; 0 picks a free one (default: 8470)")
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        metavar="PATH",
        help="the node's SQLite file (default: node/node.sqlite in the Tracemill home folder)",
    )
    p.add_argument(
        "--model-file",
        type=Path,
        action="append",
        default=None,
        metavar="PATH",
        help="a GGUF file the node accepts and serves (repeatable; default: the default model)",
    )
    p.set_defaults(func=run_node)


def run_node(args: argparse.Namespace) -> int:
    """Start the node, print where it is and what it offers, and serve until interrupted."""
    from client.network import default_model_file
    from client.paths import Paths
    from network.server import NodeServer

    paths = Paths.default()
    db = args.db or paths.node_db
    files = args.model_file or [default_model_file(paths)]
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"model file {f} does not exist")
    server = NodeServer(
        db, host=args.host, port=args.port, model_files={f.name: f for f in files}, access_log=True
    )
    url = server.start()
    previous = _stop_on_sigterm()
    try:
        print(f"node: {url}", flush=True)
        print(f"database: {db}", flush=True)
        for m in server.accepted_models:
            print(f"accepted model: {m.name} {m.filename} sha256 {m.sha256} ({m.size} bytes)", flush=True)
        cfg = server.config
        print(f"families: {', '.join(cfg.families)} (env {cfg.env}, group size {cfg.group_size})", flush=True)
        print("serving; Ctrl-C stops", flush=True)
        while server.running:  # time.sleep, unlike Event.wait, is interrupted by Ctrl-C on Windows too
            time.sleep(0.5)
        print("the node stopped on its own; see the log", file=sys.stderr)
        return 1
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _stop_on_sigterm() -> Any:
    """Make SIGTERM (systemd, docker stop) stop the node cleanly, like Ctrl-C; returns the old handler."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)

