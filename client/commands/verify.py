"""`tracemill verify TASK.json COMPLETION.txt`: score one completion locally and print the verdict."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register", "run_verify"]

#: Exit status for a file that cannot be read or is not a task.
BAD_INPUT = 2


def register(sub: Any) -> None:
    """Add the ``verify`` command to the ``tracemill`` parser."""
    p = sub.add_parser("verify", help="verify one completion of a task and print the verdict as JSON")
    p.add_argument("task", type=Path, help="the task, as the node's JSON")
    p.add_argument("completion", help="a text file holding the model's completion ('-' reads stdin)")
    p.set_defaults(func=run_verify)


def _fail(message: str) -> int:
    print(f"tracemill verify: {message}", file=sys.stderr)
    return BAD_INPUT


def run_verify(args: argparse.Namespace) -> int:
    """Print the verdict as one JSON object; 2 with a one-line error for a bad task or completion file."""
    from pydantic import ValidationError

    from protocol import Task
    from verifier import UnknownEnvironmentError, verify

    try:
        task = Task.model_validate_json(Path(args.task).read_bytes())
    except OSError as exc:
        return _fail(f"cannot read task file {args.task}: {exc.strerror or exc}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "task"
        return _fail(f"{args.task} is not a valid task ({where}: {first.get('msg', 'invalid')})")
    try:
        if args.completion == "-":
            completion = sys.stdin.read()
        else:
            completion = Path(args.completion).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        return _fail(f"cannot read completion file {args.completion}: {why}")
    try:
        verdict = verify(task, completion)
    except UnknownEnvironmentError as exc:
        return _fail(f"{args.task}: {exc}")
    print(json.dumps(verdict.model_dump(mode="json"), indent=2, sort_keys=True))
    return 0
