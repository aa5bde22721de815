"""The hardware probe on this machine, and the fit estimate on synthetic hardware profiles (GPUs cannot
be had here, so the profiles are written by hand; the arithmetic under test is the real one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.gguf import read_gguf
from inference.hardware import GpuDevice, Hardware, ModelShape, estimate_fit, kv_cells, probe_hardware

GB = 1_000_000_000
# A 28-layer, 2.8 GB model: 90 MB per layer, 280 MB of embeddings/output, 50 kB of KV cache per token.
SHAPE = ModelShape(
    weights_bytes=2_800_000_000, n_layer=28, kv_bytes_per_token=50_000, n_vocab=32_000, layer_bytes=90_000_000
)


def machine(*, vram: int | None = None, ram: int = 16 * GB, offload: bool = True) -> Hardware:
    gpus = (
        (
            GpuDevice(
                name="CUDA0",
                description="NVIDIA GeForce RTX 3050",
                backend="CUDA",
                memory_total=vram,
                memory_free=vram,
            ),
        )
        if vram is not None
        else ()
    )
    return Hardware(
        backends=("CUDA", "CPU") if offload else ("CPU",),
        gpu_offload=offload,
        gpus=gpus,
        ram_total=ram,
        ram_available=ram,
        cpu_threads=8,
    )


def test_cpu_only_build_says_why_the_gpu_is_not_used() -> None:
    plan = estimate_fit(SHAPE, machine(offload=False), n_ctx=2048, group=1)
    assert plan.fits and plan.n_gpu_layers == 0
    assert "no GPU backend" in plan.reason


def test_gpu_backend_without_a_gpu() -> None:
    plan = estimate_fit(SHAPE, machine(), n_ctx=2048, group=1)
    assert plan.n_gpu_layers == 0 and "no GPU was found" in plan.reason


def test_a_model_that_fits_goes_wholly_on_the_gpu() -> None:
    plan = estimate_fit(SHAPE, machine(vram=8 * GB), n_ctx=2048, group=1)
    assert plan.n_gpu_layers == 28 and plan.fits
    assert "all 28 layers on the GPU" in plan.reason and "RTX 3050" in plan.reason


def test_a_model_too_big_for_the_gpu_is_split_by_layers() -> None:
    # By hand: KV = 50 kB x (1 x 2048) cells = 102.4 MB; compute = 4 x 32000 x 512 + 64 MiB;
    # room = 2 GB - 512 MiB - compute - 280 MB = 1 050 484 224; per layer 90 MB + 102.4 MB / 28 -> 11 layers.
    plan = estimate_fit(SHAPE, machine(vram=2 * GB), n_ctx=2048, group=1)
    assert plan.n_gpu_layers == 11
    assert plan.reason == "model needs 3.0 GB, GPU has 2.0 GB: 11 of 28 layers on the GPU"
    bigger = estimate_fit(SHAPE, machine(vram=3 * GB), n_ctx=2048, group=1)
    assert 11 < bigger.n_gpu_layers < 28


def test_the_group_size_counts_in_the_kv_cache() -> None:
    assert kv_cells(2048, 8) == 8 * 2048  # one KV stream per sequence, each holding its prompt copy
    one = estimate_fit(SHAPE, machine(vram=3 * GB), n_ctx=4096, group=1)
    eight = estimate_fit(SHAPE, machine(vram=3 * GB), n_ctx=4096, group=8)
    assert eight.kv_bytes > one.kv_bytes and eight.n_gpu_layers < one.n_gpu_layers


def test_a_model_larger_than_memory_does_not_fit() -> None:
    plan = estimate_fit(SHAPE, machine(offload=False, ram=2 * GB), n_ctx=2048, group=1)
    assert not plan.fits and "choose a smaller model" in plan.reason
    with_gpu = estimate_fit(SHAPE, machine(vram=8 * GB, ram=2 * GB), n_ctx=2048, group=1)
    assert with_gpu.fits  # everything on the GPU: system RAM is not the limit


def test_shape_from_the_real_gguf(default_model_path: Path) -> None:
    shape = ModelShape.from_gguf(read_gguf(default_model_path))
    assert shape.n_layer == 30 and shape.n_vocab == 49152
    assert shape.kv_bytes_per_token == 2 * 30 * 3 * 64 * 2  # K and V, 30 layers, 3 KV heads of 64, f16
    assert 0.9 * 98_362_432 < shape.weights_bytes <= 98_362_432


def test_probe_this_machine() -> None:
    hw = probe_hardware()
    assert "CPU" in hw.backends and hw.ram_total > 0 and hw.cpu_threads >= 1
    lines = hw.describe()
    assert any(line.startswith("RAM:") for line in lines)
    if not hw.gpu_offload:
        assert any("no GPU backend" in line for line in lines)


@pytest.mark.parametrize("vram", [1 * GB, 2 * GB, 4 * GB, 6 * GB])
def test_layers_never_exceed_what_the_gpu_holds(vram: int) -> None:
    plan = estimate_fit(SHAPE, machine(vram=vram), n_ctx=2048, group=4)
    on_gpu = plan.n_gpu_layers * (SHAPE.layer_bytes + plan.kv_bytes // SHAPE.n_layer)
    assert on_gpu <= vram
