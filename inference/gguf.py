"""Read a GGUF file's header, metadata and tensor table without llama.cpp.

llama.cpp may abort the whole process on some malformed files, so every file is checked here first:
magic, version, that the metadata parses, and that the file is long enough to hold every tensor.
The same pass gives what the fit estimate needs (layers, embedding size, KV heads, tensor sizes).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from inference.errors import ModelLoadError

__all__ = ["GGUF_MAGIC", "GgufInfo", "read_gguf"]

GGUF_MAGIC = b"GGUF"
_MAX_STRING = 1 << 26  # 64 MiB: larger "strings" mean a corrupt file
_MAX_COUNT = 1 << 28

# ggml type id -> (elements per block, bytes per block), for the types GGUF files use.
_GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4),
    1: (1, 2),
    2: (32, 18),
    3: (32, 20),
    6: (32, 22),
    7: (32, 24),
    8: (32, 34),
    9: (32, 36),
    10: (256, 84),
    11: (256, 110),
    12: (256, 144),
    13: (256, 176),
    14: (256, 210),
    15: (256, 292),
    16: (256, 66),
    17: (256, 74),
    18: (256, 98),
    19: (256, 50),
    20: (32, 18),
    21: (256, 110),
    22: (256, 82),
    23: (256, 136),
    24: (1, 1),
    25: (1, 2),
    26: (1, 4),
    27: (1, 8),
    28: (1, 8),
    29: (256, 56),
    30: (1, 2),
    34: (256, 54),
    35: (256, 66),
    39: (32, 17),
}
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.")


@dataclass
class GgufInfo:
    """What Tracemill needs to know about a GGUF file before loading it."""

    path: Path
    file_size: int
    version: int
    metadata: dict[str, Any]
    tensor_bytes: int = 0
    layer_bytes: dict[int, int] = field(default_factory=dict)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_value(self, key: str, default: int = 0) -> int:
        value = self.metadata.get(f"{self.architecture}.{key}", default)
        if isinstance(value, list):  # per-layer values (some architectures): take the largest
            value = max(value) if value else default
        return int(value)

    @property
    def n_layer(self) -> int:
        return self.arch_value("block_count")

    @property
    def n_embd(self) -> int:
        return self.arch_value("embedding_length")

    @property
    def n_head(self) -> int:
        return self.arch_value("attention.head_count", 1)

    @property
    def n_head_kv(self) -> int:
        return self.arch_value("attention.head_count_kv", self.n_head)

    @property
    def head_dim(self) -> int:
        return self.arch_value("attention.key_length", self.n_embd // max(self.n_head, 1))

    @property
    def context_length(self) -> int:
        return self.arch_value("context_length", 2048)

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) else None

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name", self.path.stem))

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int:
        """K and V cache bytes one token takes across all layers (f16 cache by default)."""
        return 2 * self.n_layer * self.n_head_kv * self.head_dim * bytes_per_value


class _Reader:
    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f = f
        self.path = path

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise ModelLoadError(f"{self.path.name} is truncated (its header ends early); download it again.")
        return data

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > _MAX_STRING:
            raise ModelLoadError(f"{self.path.name} is not a valid GGUF file (corrupt metadata).")
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            item_type = self.scalar("<I")
            count = self.scalar("<Q")
            if count > _MAX_COUNT:
                raise ModelLoadError(f"{self.path.name} is not a valid GGUF file (corrupt metadata).")
            if item_type in _SCALARS:
                fmt = _SCALARS[item_type]
                size = struct.calcsize(fmt)
                raw = self.take(size * count)
                return list(struct.unpack(f"<{count}{fmt[1]}", raw)) if count <= 4096 else _Skipped(count)
            items = [self.value(item_type) for _ in range(count)]
            return items if count <= 4096 else _Skipped(count)
        raise ModelLoadError(f"{self.path.name} is not a valid GGUF file (unknown metadata type {vtype}).")


@dataclass(frozen=True)
class _Skipped:
    """A long array (e.g. the tokenizer's vocabulary) kept only as its length."""

    count: int


def read_gguf(path: Path) -> GgufInfo:
    """Parse and sanity-check ``path``; raise ModelLoadError with a user-actionable message if it is bad."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"Model file {path} does not exist; download the model first.")
    file_size = path.stat().st_size
    try:
        with path.open("rb") as f:
            return _read(f, path, file_size)
    except OSError as exc:
        raise ModelLoadError(f"Cannot read model file {path} ({exc.strerror or exc}).") from exc


def _read(f: BinaryIO, path: Path, file_size: int) -> GgufInfo:
    magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise ModelLoadError(f"{path.name} is not a GGUF model file; choose a .gguf model.")
    r = _Reader(f, path)
    version = r.scalar("<I")
    if version not in (2, 3):
        raise ModelLoadError(f"{path.name} uses GGUF version {version}, which this app cannot read.")
    n_tensors = r.scalar("<Q")
    n_kv = r.scalar("<Q")
    if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
        raise ModelLoadError(f"{path.name} is not a valid GGUF file (corrupt header).")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.string()
        metadata[key] = r.value(r.scalar("<I"))
    info = GgufInfo(path=path, file_size=file_size, version=version, metadata=metadata)
    data_end = 0
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.scalar("<I")
        if n_dims > 8:
            raise ModelLoadError(f"{path.name} is not a valid GGUF file (corrupt tensor table).")
        n_elements = 1
        for _ in range(n_dims):
            n_elements *= r.scalar("<Q")
        ggml_type = r.scalar("<I")
        offset = r.scalar("<Q")
        block, block_bytes = _GGML_BLOCKS.get(ggml_type, (1, 0))
        nbytes = -(-n_elements // block) * block_bytes
        data_end = max(data_end, offset + nbytes)
        info.tensor_bytes += nbytes
        m = _LAYER_TENSOR.match(name)
        if m:
            layer = int(m.group(1))
            info.layer_bytes[layer] = info.layer_bytes.get(layer, 0) + nbytes
    alignment = int(metadata.get("general.alignment", 32)) or 32
    data_start = -(-f.tell() // alignment) * alignment
    if data_start + data_end > file_size:
        raise ModelLoadError(
            f"{path.name} is truncated ({file_size} bytes, needs {data_start + data_end}); download it again."
        )
    return info
