"""`tracemill contribute`: headless contribution with progress lines and a summary."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from client.contribute import LoopEvent, RunSummary
from client.network import add_network_argument, resolve_network
from client.paths import Paths

__all__ = ["register", "contribute_headless"]


def register(sub: Any) -> None:
    p = sub.add_parser("contribute", help="contribute headless: lease, generate, verify, sign, upload")
    add_network_argument(p)
    p.add_argument("--tasks", type=int, default=None, metavar="N",
                   help="stop after N tasks (default: run until Ctrl-C)")
    p.set_defaults(func=run_contribute)


def _print_event(event: LoopEvent) -> None:
    stamp = time.strftime("%H:%M:%S")
    if event.kind == "stopped":
        return
    print(f"[{stamp}] {event.message}", flush=True)


class _Progress:
    """A one-line download progress indicator on stderr."""

    def __init__(self) -> None:
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        pct = int(done * 100 / total) if total else 0
        if pct != self.last:
            self.last = pct
            end = "\n" if done >= total else ""
            print(f"\rdownloading model: {pct:3d}% ({done // 1_000_000}/{total // 1_000_000} MB)",
                  end=end, file=sys.stderr, flush=True)


def contribute_headless(args: argparse.Namespace, paths: Paths) -> RunSummary:
    """Run the loop in this process until done or interrupted; Ctrl-C finishes the current step,
    uploads what is queued and prints the summary."""
    from inference.engine import Engine
    from verifier import describe_sandbox

    cancel = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        print("\nstopping after this step (Ctrl-C again to quit at once)…", file=sys.stderr, flush=True)
        cancel.set()

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    try:
        from client.session import open_session

        with resolve_network(args, paths) as url, open_session(url, paths, _Progress()) as session:
            print(f"network: {url}")
            print(f"wallet address: {session.identity.address} (key kept in: {session.keystore})")
            print(f"model: {session.model.name} ({session.model_path})")
            print(describe_sandbox())
            engine = Engine(session.model_path, n_threads=session.config.n_threads)
            try:
                summary = session.loop(engine, on_event=_print_event, cancel=cancel).run(args.tasks)
            finally:
                engine.close()
            balance = session.node.balance()
            print(f"done: {summary.line()}")
            print(f"wallet balance on the network: {balance.balance:.2f} credits "
                  f"({balance.accepted} accepted, {balance.rejected} rejected traces)")
            return summary
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def run_contribute(args: argparse.Namespace) -> int:
    summary = contribute_headless(args, Paths.default())
    return 0 if summary.queued == 0 else 3
