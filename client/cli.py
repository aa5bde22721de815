"""The ``tracemill`` command. Each command lives in ``client/commands/<name>.py`` and registers itself;
the GUI is imported only when it is asked for, so a headless rig needs no Qt."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys

from client.logs import setup_logging
from client.paths import Paths

__all__ = ["main", "build_parser"]

log = logging.getLogger("tracemill")

COMMANDS = ["run", "contribute", "wallet", "models", "verify", "node", "gui"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracemill",
        description="Donate idle GPU/CPU time to open reinforcement learning: generate, verify and sign "
        "reasoning traces, and earn credits.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to the console")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"client.commands.{name}")
        except ImportError as exc:  # a command whose optional part is not installed
            log.debug("command %s unavailable: %s", name, exc)
            continue
        module.register(sub)
    return parser


def user_error_types() -> tuple[type[BaseException], ...]:
    """Errors a user can cause or fix: reported in one line, without a traceback."""
    from client.api import NodeError
    from client.config import ConfigError
    from client.outbox import OutboxError

    types: list[type[BaseException]] = [NodeError, ConfigError, OutboxError, FileNotFoundError]
    for module, name in (
        ("wallet.errors", "WalletError"),
        ("inference.errors", "InferenceError"),
        ("verifier", "UnknownEnvironmentError"),
        ("client.session", "ModelChoiceError"),
        ("client.network", "EmbeddedNodeUnavailable"),
    ):
        with contextlib.suppress(ImportError, AttributeError):
            types.append(getattr(importlib.import_module(module), name))
    return tuple(types)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["run", *(argv or [])])
    paths = Paths.default()
    setup_logging(paths.logs_dir, verbose=args.verbose)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("tracemill: stopped", file=sys.stderr)
        return 130
    except user_error_types() as exc:
        log.info("command failed: %s", exc, exc_info=True)
        print(f"tracemill: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        log.exception("unexpected error")
        print(
            f"tracemill: unexpected error: {exc!r}. Details are in {paths.logs_dir / 'tracemill.log'}",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
