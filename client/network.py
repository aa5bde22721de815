"""Which network to talk to: ``--network URL``, else the configured one, else the embedded local node."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from client.config import load_config
from client.paths import Paths, models_cache_dir

__all__ = ["EmbeddedNodeUnavailable", "add_network_argument", "embedded_node", "resolve_network"]

log = logging.getLogger(__name__)


class EmbeddedNodeUnavailable(Exception):
    """No network is configured and the node's packages (the `node` extra) are not installed."""


def add_network_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--network",
        metavar="URL",
        help="the network node to talk to (default: the configured one, else the embedded local node)",
    )


def default_model_file(paths: Paths) -> Path:
    """The default model's file, fetched on first use (from the shared cache when one is set)."""
    from inference.default_model import ensure_default_model

    return ensure_default_model(models_cache_dir() or paths.models_dir)


@contextmanager
def embedded_node(paths: Paths) -> Iterator[str]:
    """Start the local node on loopback with its SQLite file in the home folder; yield its URL."""
    from inference.default_model import DEFAULT_MODEL_FILENAME

    try:
        from network.server import NodeServer
    except ImportError as exc:
        raise EmbeddedNodeUnavailable(
            f"the embedded local node is not installed ({exc}); install it with "
            "`pip install 'tracemill[node]'`, or pass --network URL"
        ) from exc

    paths.ensure()
    server = NodeServer(paths.node_db, model_files={DEFAULT_MODEL_FILENAME: default_model_file(paths)})
    url = server.start()
    log.info("embedded local node at %s (database %s)", url, paths.node_db)
    try:
        yield url
    finally:
        server.stop()


@contextmanager
def resolve_network(args: argparse.Namespace, paths: Paths | None = None) -> Iterator[str]:
    """Yield the URL of the network node for this command, starting the embedded one if needed."""
    paths = paths or Paths.default()
    url = getattr(args, "network", None) or load_config(paths.config_file).network_url
    if url:
        yield url.rstrip("/")
        return
    with embedded_node(paths) as local_url:
        yield local_url
