"""Shared fixtures: the real default model, a real node on loopback, a fresh Tracemill home."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Qt aborts the process when it has neither a display nor this; tests never need a real screen.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def models_dir() -> Path:
    return Path(os.environ.get("TRACEMILL_MODELS_DIR") or REPO / ".models").resolve()


@pytest.fixture(scope="session")
def default_model_path() -> Path:
    """The real SmolLM2-135M-Instruct Q4_1 GGUF (fetched once into TRACEMILL_MODELS_DIR)."""
    from inference.default_model import ensure_default_model

    return ensure_default_model(models_dir())


@pytest.fixture
def tracemill_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty TRACEMILL_HOME. No Secret Service runs in the plain test environment, so the
    wallet uses its encrypted-file keystore with this passphrase."""
    home = tmp_path / "home"
    monkeypatch.setenv("TRACEMILL_HOME", str(home))
    monkeypatch.setenv("TRACEMILL_PASSPHRASE", "correct horse battery staple 42")
    monkeypatch.setenv("TRACEMILL_MODELS_DIR", str(models_dir()))
    return home


@pytest.fixture
def node_url(tmp_path: Path, default_model_path: Path) -> Iterator[str]:
    """A real node (FastAPI + uvicorn) on 127.0.0.1, on a free port, with its own SQLite file."""
    from inference.default_model import DEFAULT_MODEL_FILENAME
    from network.server import NodeServer

    server = NodeServer(tmp_path / "node.sqlite", model_files={DEFAULT_MODEL_FILENAME: default_model_path})
    url = server.start()
    try:
        yield url
    finally:
        server.stop()
