"""Handing out leases: a few tasks from the configured families, a fresh sampling seed, an expiry."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from network.config import NodeConfig
from network.errors import NodeHTTPError
from network.model_files import ModelFile
from network.storage import Storage
from protocol import Lease, LeaseRequest, Task

__all__ = ["check_families", "issue_lease"]


def check_families(config: NodeConfig) -> None:
    """Refuse to start a node that offers a family the verifier does not know."""
    from verifier.environments import available_families

    known = set(available_families(config.env))
    unknown = [f for f in config.families if f not in known]
    if unknown:
        raise ValueError(f"the verifier does not know these task families: {', '.join(unknown)}")


def issue_lease(
    storage: Storage,
    config: NodeConfig,
    models: Mapping[str, ModelFile],
    contributor: str,
    request: LeaseRequest,
    *,
    now: float,
) -> Lease:
    """Make, store and return a new lease for ``contributor``.

    Tasks are ``make_task(env, family, task_seed, index)`` for index 0..count-1 with a random task seed
    per lease, families taken in turn from a random starting point; so task ids are a deterministic
    function of (env, family, task_seed, index) and the node can rebuild any task it handed out.
    """
    from verifier.environments import make_task

    if request.model_sha256 not in {m.info.sha256 for m in models.values()}:
        raise NodeHTTPError(
            400,
            "unknown_model",
            "this node does not accept that model; GET /v1/models lists the ones it does",
        )
    count = min(request.count, config.max_tasks_per_lease)
    task_seed = secrets.randbelow(2**32)
    first = secrets.randbelow(len(config.families))
    tasks: list[Task] = []
    for index in range(count):
        family = config.families[(first + index) % len(config.families)]
        tasks.append(
            make_task(
                config.env, family, task_seed, index, group_size=config.group_size, sampling=config.sampling
            )
        )
    if len({t.task_id for t in tasks}) != len(tasks):
        raise RuntimeError("the verifier gave two tasks of one lease the same id")
    lease = Lease(
        lease_id=secrets.token_hex(16),
        contributor=contributor,
        model_sha256=request.model_sha256,
        seed=secrets.randbelow(2**63),
        tasks=tasks,
        issued_at=now,
        expires_at=now + config.lease_seconds,
    )
    storage.add_lease(lease, task_seed)
    return lease
