"""`tracemill run` (also plain `tracemill`): the app — a window where a display exists, headless otherwise."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from client.network import add_network_argument
from client.paths import Paths

__all__ = ["register", "has_display"]


def has_display() -> bool:
    """True where a window can be shown (Windows, macOS, or an X11/Wayland session)."""
    if sys.platform in ("win32", "darwin"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="start Tracemill: the window if there is a display, headless otherwise")
    add_network_argument(p)
    p.add_argument("--tasks", type=int, default=None, metavar="N",
                   help="stop after N tasks (default: run until stopped)")
    p.add_argument("--headless", action="store_true", help="never open a window")
    p.set_defaults(func=run_app)


def run_app(args: argparse.Namespace) -> int:
    if not args.headless and has_display():
        try:
            from ui.app import run_gui
        except ImportError as exc:
            print(f"tracemill: the desktop window is not installed ({exc}); running headless. "
                  "Install it with: pip install 'tracemill[gui]'", file=sys.stderr)
        else:
            return run_gui(args)
    from client.commands.contribute import contribute_headless

    summary = contribute_headless(args, Paths.default())
    return 0 if summary.queued == 0 else 3
