"""`tracemill models list|download|remove|hardware`: the models the network accepts and those on disk."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["register", "run_list", "run_download", "run_remove", "run_hardware"]


def register(sub: Any) -> None:
    """Add the ``models`` command and its sub-commands to the ``tracemill`` parser."""
    from client.network import add_network_argument

    p = sub.add_parser("models", help="list, download and remove models; show the hardware")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION")
    p.set_defaults(func=run_list, network=None, offline=False)

    lp = msub.add_parser("list", help="models on disk and the ones the network accepts")
    add_network_argument(lp)
    lp.add_argument("--offline", action="store_true", help="only the models on disk; do not ask a network")
    lp.set_defaults(func=run_list)

    dp = msub.add_parser("download", help="download a model the network accepts (resumes an interrupted one)")
    add_network_argument(dp)
    dp.add_argument("name", nargs="?", help="model name or file name (default: the network's first)")
    dp.set_defaults(func=run_download)

    rp = msub.add_parser("remove", help="delete a downloaded model file")
    rp.add_argument("filename", help="the model's file name, as `tracemill models list` shows it")
    rp.set_defaults(func=run_remove)

    hp = msub.add_parser("hardware", help="what hardware llama.cpp sees and how the models fit on it")
    hp.set_defaults(func=run_hardware)


def _store() -> Any:
    from client.paths import Paths
    from inference.models import ModelStore

    return ModelStore(Paths.default().models_dir)


def _mb(n: int) -> str:
    return f"{n / 1_000_000:,.0f} MB"


def _fit_line(path: Path) -> str:
    from inference.errors import InferenceError
    from inference.gguf import read_gguf
    from inference.hardware import ModelShape, estimate_fit, probe_hardware

    try:
        plan = estimate_fit(ModelShape.from_gguf(read_gguf(path)), probe_hardware())
    except InferenceError as exc:
        return f"cannot be used: {exc}"
    return plan.reason if plan.fits else f"does not fit: {plan.reason}"


def run_list(args: argparse.Namespace) -> int:
    """Print installed models (with their fit on this machine) and, unless offline, the network's list."""
    from client.paths import models_cache_dir
    from inference.models import ModelStore

    stores = [_store()] + ([ModelStore(d)] if (d := models_cache_dir()) else [])
    installed = [m for s in stores for m in s.installed()]
    print("Installed:")
    if not installed:
        print("  (none)")
    for m in installed:
        state = "verified" if m.sha256 else "not verified yet"
        print(f"  {m.filename}  {_mb(m.size)}  {state}  [{m.path.parent}]")
        print(f"      {_fit_line(m.path)}")
    for filename, have in _store().partial():
        print(f"  {filename}  partly downloaded ({_mb(have)}); `tracemill models download` resumes it")
    if getattr(args, "offline", False):
        return 0
    from client.api import NodeClient
    from client.network import resolve_network

    with resolve_network(args) as url, NodeClient(url) as node:
        models = node.models()
    print(f"Accepted by the network at {url}:")
    if not models:
        print("  (none)")
    for model in models:
        mine = any(m.filename == model.filename and m.size == model.size for m in installed)
        state = "installed" if mine else "not installed"
        quant = f" {model.quantization}" if model.quantization else ""
        print(f"  {model.name}{quant}  {model.filename}  {_mb(model.size)}  {state}")
    return 0


class _ProgressLine:
    """One self-updating line on stderr (at most a few updates a second)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = 0.0
        self.start = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.25 and done != total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-6)
        pct = f"{100 * done / total:5.1f}%" if total else ""
        print(
            f"\r{self.label}: {pct} {_mb(done)} of {_mb(total)} ({rate / 1e6:.1f} MB/s)   ",
            end="",
            file=sys.stderr,
            flush=True,
        )


def run_download(args: argparse.Namespace) -> int:
    """Download one accepted model into the home's models folder, resuming a partial download."""
    from client.api import NodeClient
    from client.network import resolve_network

    with resolve_network(args) as url, NodeClient(url) as node:
        models = node.models()
        if not models:
            print("tracemill models: the network accepts no models at the moment", file=sys.stderr)
            return 1
        wanted = args.name
        chosen = next((m for m in models if wanted in (None, m.name, m.filename)), None)
        if chosen is None:
            names = ", ".join(m.filename for m in models)
            print(
                f"tracemill models: the network does not accept {wanted!r} (it accepts: {names})",
                file=sys.stderr,
            )
            return 1
        progress = _ProgressLine(chosen.filename)
        path = _store().download(
            chosen.filename,
            node.absolute_url(chosen.url),
            sha256=chosen.sha256,
            size=chosen.size,
            http=node.http,
            progress=progress,
        )
    print(file=sys.stderr)
    print(f"{chosen.name}: {path} (sha256 verified)")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    if _store().remove(args.filename):
        print(f"removed {args.filename}")
        return 0
    print(f"tracemill models: {args.filename} is not installed", file=sys.stderr)
    return 1


def run_hardware(args: argparse.Namespace) -> int:
    """Print the hardware probe and, for each installed model, how it would be placed."""
    from inference.hardware import probe_hardware

    for line in probe_hardware().describe():
        print(line)
    for m in _store().installed():
        print(f"{m.filename}: {_fit_line(m.path)}")
    return 0
