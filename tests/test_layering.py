"""The dependency rules of DESIGN.md: only ui/ imports Qt; lower layers never import client/ or ui/."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORE = ["protocol", "inference", "verifier", "wallet", "memory", "client", "network"]
LOWER = ["protocol", "inference", "verifier", "wallet", "memory", "network"]


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def files_of(packages: list[str]) -> list[Path]:
    return [p for pkg in packages for p in (REPO / pkg).rglob("*.py")]


def test_no_module_outside_ui_imports_pyside6() -> None:
    offenders = [str(p.relative_to(REPO)) for p in files_of(CORE) if "PySide6" in imported_roots(p)]
    assert offenders == []


def test_lower_layers_do_not_import_client_or_ui() -> None:
    offenders = [
        str(p.relative_to(REPO)) for p in files_of(LOWER) if imported_roots(p) & {"client", "ui"}
    ]
    assert offenders == []


def test_importing_the_whole_core_and_cli_loads_no_qt() -> None:
    """Import every core module (and build the CLI parser) in a fresh interpreter: Qt stays unloaded."""
    modules = sorted(
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in files_of(CORE)
        if p.name != "__main__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "from client.cli import build_parser; build_parser()\n"
        "bad = sorted(m for m in sys.modules if m.startswith('PySide6'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
