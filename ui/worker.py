"""The contribution worker: one thread that owns the model and runs the loop, paused and resumed
from the GUI. It reports only through the callback it is given (the GUI passes its EventBridge)."""

from __future__ import annotations

import argparse
import logging
import threading
from collections.abc import Callable
from typing import Any

from client.contribute import LoopEvent

__all__ = ["ContributionWorker"]

log = logging.getLogger(__name__)


class ContributionWorker:
    """Starts paused or running; ``pause``/``resume``/``stop`` may be called from any thread."""

    def __init__(self, args: argparse.Namespace, on_event: Callable[[Any], None]) -> None:
        self.args = args
        self.on_event = on_event
        self.cancel = threading.Event()
        self.resume_signal = threading.Event()
        self.quit = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tracemill-contribute", daemon=True)

    def start(self) -> None:
        self.resume_signal.set()
        self.thread.start()

    def pause(self) -> None:
        self.resume_signal.clear()
        self.cancel.set()

    def resume(self) -> None:
        self.cancel.clear()
        self.resume_signal.set()

    def stop(self, timeout: float = 30.0) -> None:
        self.quit.set()
        self.cancel.set()
        self.resume_signal.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _run(self) -> None:
        from client.network import resolve_network
        from client.paths import Paths
        from client.session import open_session

        paths = Paths.default()

        def progress(done: int, total: int) -> None:
            self.on_event(LoopEvent("download", "downloading the model", {"done": done, "total": total}))

        try:
            self.on_event(LoopEvent("status", "starting the network connection"))
            with resolve_network(self.args, paths) as url, open_session(url, paths, progress) as session:
                from inference.engine import Engine
                from verifier import describe_sandbox

                self.on_event(LoopEvent("status", describe_sandbox()))
                self.on_event(LoopEvent("ready", f"contributing to {url} with {session.model.name}", {
                    "address": session.identity.address, "keystore": session.keystore,
                    "model": session.model.name, "network": url}))
                engine = Engine(session.model_path, n_threads=session.config.n_threads)
                try:
                    while not self.quit.is_set():
                        self.resume_signal.wait()
                        if self.quit.is_set():
                            break
                        loop = session.loop(engine, on_event=self.on_event, cancel=self.cancel)
                        loop.run(getattr(self.args, "tasks", None))
                        balance = session.node.balance()
                        self.on_event(LoopEvent("balance", f"{balance.balance:.2f} credits",
                                                {"balance": balance}))
                        if getattr(self.args, "tasks", None) is not None:
                            break
                        if not self.quit.is_set():
                            self.on_event(LoopEvent("paused", "paused"))
                finally:
                    engine.close()
        except Exception as exc:  # every failure reaches the window as words, never a crash
            log.exception("contribution worker failed")
            self.on_event(LoopEvent("error", str(exc)))
        self.on_event(LoopEvent("finished", "stopped"))
