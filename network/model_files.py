"""The models a node accepts, and serving their files with HTTP Range (so downloads can resume)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from network.errors import NodeHTTPError
from protocol import AcceptedModel

__all__ = [
    "ByteRange",
    "ModelFile",
    "default_model_files",
    "iter_file",
    "load_models",
    "parse_range",
]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_hash_cache: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


@dataclass(frozen=True)
class ModelFile:
    """An accepted model: what the node advertises, and where its bytes are on this machine."""

    info: AcceptedModel
    path: Path


def default_model_files(models_dir: str | Path | None = None) -> dict[str, Path]:
    """The default model in ``models_dir`` (or ``TRACEMILL_MODELS_DIR``), when that file exists."""
    from inference.default_model import DEFAULT_MODEL_FILENAME

    folder = models_dir or os.environ.get("TRACEMILL_MODELS_DIR")
    if not folder:
        return {}
    path = Path(folder) / DEFAULT_MODEL_FILENAME
    return {DEFAULT_MODEL_FILENAME: path} if path.is_file() else {}


def _sha256_of(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime) so a process hashes each file once."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        if key in _hash_cache:
            return _hash_cache[key]
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    with _hash_lock:
        _hash_cache[key] = digest
    return digest


def load_models(model_files: Mapping[str, str | Path]) -> dict[str, ModelFile]:
    """Describe each accepted model file (filename -> local path); checks that each file exists.

    The default model keeps its known name and must have its known sha256; other files are named after
    their filename.
    """
    from inference.default_model import DEFAULT_MODEL_FILENAME, DEFAULT_MODEL_NAME, DEFAULT_MODEL_SHA256

    models: dict[str, ModelFile] = {}
    for filename, raw_path in model_files.items():
        path = Path(raw_path)
        if not path.is_file():
            raise FileNotFoundError(f"accepted model file {filename!r} is not at {path}")
        digest = _sha256_of(path)
        name = filename.removesuffix(".gguf")
        if filename == DEFAULT_MODEL_FILENAME:
            if digest != DEFAULT_MODEL_SHA256:
                raise ValueError(f"{path} is not the default model (sha256 {digest}); fetch it again")
            name = DEFAULT_MODEL_NAME
        quant = m.group(1) if (m := re.search(r"\.(Q\d\w*|F16|F32|BF16)\.gguf$", filename, re.I)) else ""
        info = AcceptedModel(
            name=name,
            filename=filename,
            url=f"/v1/models/{filename}",
            sha256=digest,
            size=path.stat().st_size,
            quantization=quant,
        )
        models[filename] = ModelFile(info=info, path=path)
        log.info("accepting model %s (%s, %d bytes, sha256 %s)", name, path, info.size, digest)
    return models


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(header: str, size: int) -> ByteRange:
    """One byte range of ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` against a file of ``size`` bytes.

    Raises NodeHTTPError 416 for anything else (several ranges, bad syntax, nothing satisfiable).
    """
    m = _RANGE.match(header.strip().replace(" ", ""))
    if m is None or (not m.group(1) and not m.group(2)):
        raise NodeHTTPError(
            416, "bad_range", f"unsupported Range {header!r}: send one 'bytes=START-END' range"
        )
    first, last = m.group(1), m.group(2)
    if not first:  # suffix range: the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            raise NodeHTTPError(416, "bad_range", f"range {header!r} selects nothing of {size} bytes")
        return ByteRange(max(0, size - n), size - 1)
    start = int(first)
    end = int(last) if last else size - 1
    if end < start:
        raise NodeHTTPError(416, "bad_range", f"range {header!r} ends before it starts")
    if start >= size:
        raise NodeHTTPError(
            416, "bad_range", f"range {header!r} starts past the end of the file ({size} bytes)"
        )
    return ByteRange(start, min(end, size - 1))


def iter_file(path: Path, start: int, length: int) -> Iterator[bytes]:
    """The bytes ``[start, start + length)`` of a file, in chunks."""
    with path.open("rb") as f:
        f.seek(start)
        left = length
        while left > 0:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
