"""Logging: named loggers, a rotating file in the user's log folder, warnings on the console."""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

__all__ = ["setup_logging"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(logs_dir: Path | None, *, verbose: bool = False) -> None:
    """Send everything at INFO to ``logs_dir/tracemill.log`` (rotated, 5 × 2 MB) and warnings (or
    everything, with ``verbose``) to stderr. Secrets are never passed to a logger."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        if getattr(handler, "_tracemill", False):
            root.removeHandler(handler)
    console = logging.StreamHandler()
    console.setLevel(logging.INFO if verbose else logging.WARNING)
    console.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    console._tracemill = True  # type: ignore[attr-defined]
    root.addHandler(console)
    if logs_dir is not None:
        try:
            logs_dir.mkdir(parents=True, exist_ok=True)
            file_handler = logging.handlers.RotatingFileHandler(
                logs_dir / "tracemill.log", maxBytes=2_000_000, backupCount=5, encoding="utf-8"
            )
        except OSError as exc:
            logging.getLogger(__name__).warning("cannot write logs to %s: %s", logs_dir, exc)
            return
        file_handler.setFormatter(logging.Formatter(FORMAT))
        file_handler._tracemill = True  # type: ignore[attr-defined]
        root.addHandler(file_handler)
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
