"""Putting the parts together for one contribution session: identity, model, engine, loop.

Used alike by the CLI and the GUI, so both do exactly the same thing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from client.api import NodeClient
from client.config import Config, load_config
from client.contribute import ContributionLoop, LoopEvent
from client.outbox import Outbox
from client.paths import Paths, models_cache_dir
from client.prompts import key_passphrase
from protocol import AcceptedModel

if TYPE_CHECKING:
    from wallet.identity import Identity

__all__ = ["ModelChoiceError", "Session", "choose_model", "open_identity", "open_session"]

log = logging.getLogger(__name__)


class ModelChoiceError(Exception):
    """No model the network accepts can be used here; the message says what to do."""


def open_identity(paths: Paths) -> tuple[Identity, str]:
    """The user's identity (made on first run) and where its key is kept, in words."""
    from wallet.keystore import load_or_create_identity

    paths.ensure()
    return load_or_create_identity(paths.wallet_dir, passphrase=key_passphrase(paths.wallet_dir))


def _installed(model: AcceptedModel, dirs: list[Path]) -> Path | None:
    """The model's file in one of ``dirs``, once its checksum is known to be right (hashed the first
    time). A file with the right size and a wrong checksum is refused with a clear error."""
    from inference.models import ModelStore

    for folder in dirs:
        found = ModelStore(folder).verified_path(model.filename, model.sha256, model.size)
        if found is not None:
            return found
    return None


def choose_model(
    node: NodeClient,
    paths: Paths,
    config: Config,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[AcceptedModel, Path]:
    """Pick the accepted model to contribute with: the configured file if it is one the network
    accepts, else an installed one, else download the first one the network lists."""
    models = node.models()
    if not models:
        raise ModelChoiceError("the network accepts no models at the moment; try again later")
    if config.model_file:
        from inference.models import sha256_file

        path = Path(config.model_file).expanduser()
        digest = sha256_file(path)
        for model in models:
            if model.sha256 == digest:
                return model, path
        raise ModelChoiceError(
            f"{path} is not a model this network accepts; pick one with `tracemill models list`"
        )
    dirs = [paths.models_dir] + ([d] if (d := models_cache_dir()) else [])
    for model in models:
        found = _installed(model, dirs)
        if found is not None:
            return model, found
    from inference.models import download_model

    model = models[0]
    log.info("downloading %s (%d MB) from the network", model.name, model.size // 1_000_000)
    path = download_model(model, node.absolute_url(model.url), paths.models_dir, http=node.http,
                          progress=progress)
    return model, path


@dataclass
class Session:
    """Everything a contribution run needs, opened and ready."""

    node: NodeClient
    identity: Identity
    keystore: str
    model: AcceptedModel
    model_path: Path
    outbox: Outbox
    config: Config

    def loop(self, engine: object, *, on_event: Callable[[LoopEvent], None] | None = None,
             cancel: threading.Event | None = None) -> ContributionLoop:
        from verifier import verify

        return ContributionLoop(
            self.node, self.identity, engine, self.model.sha256, self.outbox,  # type: ignore[arg-type]
            verify=verify,
            tasks_per_lease=self.config.tasks_per_lease,
            upload_batch=self.config.upload_batch,
            on_event=on_event,
            cancel=cancel,
        )


@contextmanager
def open_session(
    url: str, paths: Paths, progress: Callable[[int, int], None] | None = None
) -> Iterator[Session]:
    """Identity, node client (registered), model file and outbox for a run against ``url``."""
    paths.ensure()
    config = load_config(paths.config_file)
    identity, keystore = open_identity(paths)
    node = NodeClient(url, identity)
    outbox = Outbox(paths.outbox_db)
    try:
        node.register()
        model, model_path = choose_model(node, paths, config, progress)
        yield Session(node, identity, keystore, model, model_path, outbox, config)
    finally:
        outbox.close()
        node.close()
