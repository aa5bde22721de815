"""Runs INSIDE the sandbox, next to the model's code: load it, then answer calls from the host.

Untrusted side. It sends back only ``repr()`` of each result, which the host reads with
``ast.literal_eval``: the host never runs anything the model wrote and compares plain values itself,
so an object whose ``__eq__`` always says True, a forged "all tests passed" line or a patched
``assert`` gain nothing. Standard library only (runs with ``python -I -S``).
"""

import ast
import errno
import json
import os
import sys
import traceback


def _describe(exc: BaseException) -> str:
    """Type, errno name, message and the model's line that raised (for the sandbox's report)."""
    code = getattr(exc, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "solution.py"]
    where = f" (at: {frames[-1].line})" if frames and frames[-1].line else ""
    return f"{type(exc).__name__}{' ' + name if name else ''}: {exc}{where}"[:1000]


def main() -> None:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the model's prints go to stderr, never into the answers channel

    def send(message: dict) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    namespace: dict = {"__name__": "solution"}
    try:
        with open("solution.py", encoding="utf-8") as f:
            source = f.read()
        exec(compile(source, "solution.py", "exec"), namespace)
    except BaseException as exc:
        send({"load_error": _describe(exc)})
        return
    send({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            fn = namespace[request["fn"]]
            result = fn(*ast.literal_eval(request["args"]))
            send({"ok": repr(result)})
        except BaseException as exc:
            send({"error": _describe(exc)})
    os._exit(0)  # threads the model left running must not keep the sandbox alive


if __name__ == "__main__":
    main()
