"""What hardware this machine has, and how a model fits on it.

``probe_hardware()`` asks the llama.cpp build which backends it has (CUDA, Metal, Vulkan, CPU) and lists
ggml's devices with their memory, plus system RAM and CPU threads. ``estimate_fit()`` is pure arithmetic
over a ``ModelShape`` and a ``Hardware``: weights plus KV cache for the context and group size, against
VRAM and RAM; it chooses the number of GPU layers and says why in words.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from inference.errors import ModelLoadError
from inference.gguf import GgufInfo

__all__ = [
    "GpuDevice",
    "Hardware",
    "ModelShape",
    "FitPlan",
    "probe_hardware",
    "estimate_fit",
    "check_fits",
    "choose_gpu_layers",
    "format_bytes",
]

log = logging.getLogger(__name__)
GB = 1_000_000_000
_GPU_HEADROOM = 512 * 1024 * 1024  # drivers, display, fragmentation
_RAM_SHARE = 0.9  # leave the OS something


def format_bytes(n: int) -> str:
    return f"{n / GB:.1f} GB"


@dataclass(frozen=True)
class GpuDevice:
    name: str
    description: str
    backend: str
    memory_total: int | None = None
    memory_free: int | None = None


@dataclass(frozen=True)
class Hardware:
    backends: tuple[str, ...]
    gpu_offload: bool
    gpus: tuple[GpuDevice, ...]
    ram_total: int
    ram_available: int
    cpu_threads: int
    cpu_features: str = ""

    def describe(self) -> list[str]:
        """A few lines for the Models/Settings screens and ``tracemill models hardware``."""
        lines = [f"llama.cpp backends: {', '.join(self.backends) or 'none'}"]
        if not self.gpu_offload:
            lines.append("GPU: not used — this build of llama.cpp has no GPU backend (CPU only)")
        elif not self.gpus:
            lines.append("GPU: none found by the GPU backend; running on the CPU")
        for g in self.gpus:
            mem = format_bytes(g.memory_total) if g.memory_total else "memory unknown"
            lines.append(f"GPU: {g.description or g.name} ({g.backend}, {mem})")
        lines.append(f"RAM: {format_bytes(self.ram_total)} ({format_bytes(self.ram_available)} available)")
        lines.append(f"CPU threads: {self.cpu_threads}")
        return lines


@dataclass(frozen=True)
class ModelShape:
    """The sizes the fit estimate needs; from a GGUF header or written by hand (tests, model lists)."""

    weights_bytes: int
    n_layer: int
    kv_bytes_per_token: int
    n_vocab: int = 32000
    layer_bytes: int = 0  # bytes of one repeating layer; 0 = weights spread evenly

    @classmethod
    def from_gguf(cls, info: GgufInfo) -> ModelShape:
        n_vocab = info.metadata.get(f"{info.architecture}.vocab_size") or 32000
        layers = list(info.layer_bytes.values())
        return cls(
            weights_bytes=info.tensor_bytes or info.file_size,
            n_layer=max(info.n_layer, 1),
            kv_bytes_per_token=info.kv_bytes_per_token(),
            n_vocab=int(n_vocab),
            layer_bytes=max(layers) if layers else 0,
        )

    def per_layer_bytes(self) -> int:
        return self.layer_bytes or self.weights_bytes // self.n_layer


@dataclass(frozen=True)
class FitPlan:
    fits: bool
    n_gpu_layers: int
    n_layers: int
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    reason: str
    warnings: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes

    @property
    def on_gpu(self) -> bool:
        return self.n_gpu_layers > 0


def kv_cells(n_ctx: int, group: int) -> int:
    """KV cells for a group at most: each of the ``group`` sequences has its own KV stream of up to
    ``n_ctx`` cells (its copy of the prompt plus its completion; see ``inference.native.LlamaContext``)."""
    return group * n_ctx


def estimate_fit(
    shape: ModelShape,
    hw: Hardware,
    *,
    n_ctx: int = 2048,
    group: int = 8,
    n_batch: int = 512,
) -> FitPlan:
    """Choose the GPU layers for ``shape`` on ``hw`` and say whether it fits at all, in words."""
    kv = shape.kv_bytes_per_token * kv_cells(n_ctx, group)
    compute = 4 * shape.n_vocab * n_batch + 64 * 1024 * 1024
    total = shape.weights_bytes + kv + compute
    n = shape.n_layer
    layer_cost = shape.per_layer_bytes() + kv // n
    gpu = max(hw.gpus, key=lambda g: g.memory_free or g.memory_total or 0) if hw.gpus else None
    gpu_mem = (gpu.memory_free or gpu.memory_total or 0) if gpu else 0
    if not hw.gpu_offload:
        layers, why = 0, "this build of llama.cpp has no GPU backend, so the model runs on the CPU"
    elif gpu is None:
        layers, why = 0, "no GPU was found, so the model runs on the CPU"
    elif gpu_mem == 0:
        layers, why = (
            0,
            f"the memory of {gpu.description or gpu.name} cannot be read, so the model runs on the CPU",
        )
    elif total + _GPU_HEADROOM <= gpu_mem:
        layers = n
        why = (
            f"the whole model ({format_bytes(total)}) fits on {gpu.description or gpu.name} "
            f"({format_bytes(gpu_mem)} free): all {n} layers on the GPU"
        )
    else:
        room = gpu_mem - _GPU_HEADROOM - compute - (shape.weights_bytes - n * shape.per_layer_bytes())
        layers = max(0, min(n, room // layer_cost)) if layer_cost > 0 else 0
        why = (
            f"model needs {format_bytes(total)}, GPU has {format_bytes(gpu_mem)}: "
            f"{layers} of {n} layers on the GPU"
        )
    ram_needed = total - layers * layer_cost
    fits = ram_needed <= hw.ram_total * _RAM_SHARE
    warnings = []
    if not fits:
        why = (
            f"model needs {format_bytes(ram_needed)} of memory but this machine has "
            f"{format_bytes(hw.ram_total)}; choose a smaller model or a shorter context"
        )
    elif ram_needed > hw.ram_available:
        warnings.append(
            f"only {format_bytes(hw.ram_available)} of memory is free; "
            f"the model needs {format_bytes(ram_needed)}, so other apps may slow down"
        )
    return FitPlan(
        fits=fits,
        n_gpu_layers=int(layers),
        n_layers=n,
        weights_bytes=shape.weights_bytes,
        kv_bytes=kv,
        compute_bytes=compute,
        reason=why,
        warnings=warnings,
    )


def check_fits(info: GgufInfo, *, n_ctx: int, group: int = 1, hw: Hardware | None = None) -> FitPlan:
    """Raise ModelLoadError when the model cannot fit in this machine's memory at all."""
    plan = estimate_fit(ModelShape.from_gguf(info), hw or probe_hardware(), n_ctx=n_ctx, group=group)
    if not plan.fits:
        raise ModelLoadError(f"{info.path.name}: {plan.reason}.")
    for w in plan.warnings:
        log.warning("%s", w)
    return plan


def choose_gpu_layers(info: GgufInfo, *, n_ctx: int, group: int = 8, hw: Hardware | None = None) -> int:
    plan = estimate_fit(ModelShape.from_gguf(info), hw or probe_hardware(), n_ctx=n_ctx, group=group)
    log.info("GPU offload: %s", plan.reason)
    return plan.n_gpu_layers


# -- probing -----------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def probe_hardware() -> Hardware:
    """Probe once per process (the answer does not change while the app runs)."""
    ram_total, ram_available = _ram()
    threads = os.cpu_count() or 1
    try:
        import llama_cpp

        from inference.native import ensure_backend

        ensure_backend()
        offload = bool(llama_cpp.llama_supports_gpu_offload())
        features = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
        backends, gpus = _ggml_devices()
    except Exception as exc:  # a broken llama.cpp install still lets the app start and say so
        log.warning("could not probe llama.cpp backends: %s", exc)
        offload, features, backends, gpus = False, "", (), ()
    return Hardware(
        backends=backends,
        gpu_offload=offload,
        gpus=gpus,
        ram_total=ram_total,
        ram_available=ram_available,
        cpu_threads=threads,
        cpu_features=features,
    )


def _ggml_devices() -> tuple[tuple[str, ...], tuple[GpuDevice, ...]]:
    from llama_cpp._ggml import libggml as g

    vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    for name, res, args in [
        ("ggml_backend_reg_count", sz, []),
        ("ggml_backend_reg_get", vp, [sz]),
        ("ggml_backend_reg_name", cp, [vp]),
        ("ggml_backend_dev_count", sz, []),
        ("ggml_backend_dev_get", vp, [sz]),
        ("ggml_backend_dev_name", cp, [vp]),
        ("ggml_backend_dev_description", cp, [vp]),
        ("ggml_backend_dev_type", ctypes.c_int, [vp]),
        ("ggml_backend_dev_backend_reg", vp, [vp]),
        ("ggml_backend_dev_memory", None, [vp, ctypes.POINTER(sz), ctypes.POINTER(sz)]),
    ]:
        fn = getattr(g, name)
        fn.restype, fn.argtypes = res, args
    backends = tuple(
        g.ggml_backend_reg_name(g.ggml_backend_reg_get(i)).decode() for i in range(g.ggml_backend_reg_count())
    )
    gpus = []
    for i in range(g.ggml_backend_dev_count()):
        dev = g.ggml_backend_dev_get(i)
        if g.ggml_backend_dev_type(dev) not in (1, 2):  # GPU, integrated GPU
            continue
        free, total = sz(0), sz(0)
        g.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        reg = g.ggml_backend_dev_backend_reg(dev)
        gpus.append(
            GpuDevice(
                name=(g.ggml_backend_dev_name(dev) or b"").decode(),
                description=(g.ggml_backend_dev_description(dev) or b"").decode(),
                backend=(g.ggml_backend_reg_name(reg) or b"").decode() if reg else "",
                memory_total=total.value or None,
                memory_free=free.value or None,
            )
        )
    return backends, tuple(gpus)


def _ram() -> tuple[int, int]:
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        values = {}
        for line in meminfo.read_text().splitlines():
            key, _, rest = line.partition(":")
            values[key] = int(rest.split()[0]) * 1024
        total = values.get("MemTotal", 0)
        return total, values.get("MemAvailable", total)
    if sys.platform == "win32":

        class _Status(ctypes.Structure):
            _fields_ = [
                ("dwLength", ctypes.c_ulong),
                ("dwMemoryLoad", ctypes.c_ulong),
                ("ullTotalPhys", ctypes.c_ulonglong),
                ("ullAvailPhys", ctypes.c_ulonglong),
                ("ullTotalPageFile", ctypes.c_ulonglong),
                ("ullAvailPageFile", ctypes.c_ulonglong),
                ("ullTotalVirtual", ctypes.c_ulonglong),
                ("ullAvailVirtual", ctypes.c_ulonglong),
                ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
            ]

        st = _Status(dwLength=ctypes.sizeof(_Status))
        ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(st))  # type: ignore[attr-defined]
        return int(st.ullTotalPhys), int(st.ullAvailPhys)
    try:  # macOS and other POSIX systems
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    return total, total
