"""Typed settings, each declared once with its type and default; stored as JSON in the home folder."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["Config", "ConfigError", "load_config", "save_config"]


class ConfigError(Exception):
    """The config file cannot be read; the message says which file and what to do."""


class Config(BaseModel):
    model_config = ConfigDict(extra="ignore")

    network_url: str | None = Field(
        default=None, description="The network node to contribute to; empty = the embedded local node."
    )
    model_file: str | None = Field(default=None, description="A GGUF to use instead of the network's pick.")
    engine: Literal["builtin", "openai"] = Field(
        default="builtin", description="'openai' = a server the user runs (chat only)."
    )
    openai_base_url: str = "http://127.0.0.1:11434/v1"
    tasks_per_lease: int = Field(default=2, ge=1, le=32)
    upload_batch: int = Field(default=32, ge=1, le=256)
    n_threads: int | None = Field(default=None, ge=1)


def load_config(path: Path) -> Config:
    """Read the config; a missing file gives the defaults."""
    if not path.exists():
        return Config()
    try:
        return Config.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc}. Fix or delete it.") from exc


def save_config(path: Path, config: Config) -> None:
    """Write atomically: temp file, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(config.model_dump(mode="json"), indent=2).encode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
