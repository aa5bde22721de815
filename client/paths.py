"""Where Tracemill keeps its files: one home folder, from TRACEMILL_HOME or the platform's data dir."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

__all__ = ["Paths", "home_dir", "models_cache_dir"]

APP_NAME = "Tracemill"


def home_dir() -> Path:
    """The user's Tracemill folder: ``TRACEMILL_HOME`` if set (tests, portable installs), else the
    platform's per-user data folder."""
    override = os.environ.get("TRACEMILL_HOME")
    if override:
        return Path(override).expanduser().resolve()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def models_cache_dir() -> Path | None:
    """A shared folder holding the default model (the setup scripts set it), or None."""
    value = os.environ.get("TRACEMILL_MODELS_DIR")
    return Path(value).expanduser().resolve() if value else None


@dataclass(frozen=True)
class Paths:
    """Every file and folder under one home (see docs/architecture.md)."""

    home: Path

    @classmethod
    def default(cls) -> Paths:
        return cls(home_dir())

    @property
    def config_file(self) -> Path:
        return self.home / "config.json"

    @property
    def wallet_dir(self) -> Path:
        return self.home / "wallet"

    @property
    def outbox_db(self) -> Path:
        return self.home / "outbox.sqlite"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def node_db(self) -> Path:
        return self.home / "node" / "node.sqlite"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    def ensure(self) -> Paths:
        """Create the folders (private to the user) and return self."""
        for folder in (self.home, self.wallet_dir, self.models_dir, self.node_db.parent, self.logs_dir):
            folder.mkdir(parents=True, exist_ok=True)
            if os.name == "posix":
                os.chmod(folder, 0o700)
        return self
