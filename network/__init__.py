"""The reference network node: accepted models, task leases, signed trace intake with re-verification,
and the ledger (docs/protocol.md is the contract it serves).

- ``network.server.NodeServer``: uvicorn in a thread (the embedded node, tests, ``tracemill node``);
- ``network.app.create_app``: the FastAPI routes, body limits, error bodies;
- ``network.config.NodeConfig``: every setting, typed, with working defaults;
- ``network.storage`` / ``network.migrations``: the SQLite file (WAL, named migrations);
- ``network.auth``: signed requests and nonces; ``network.leases``: handing out tasks;
- ``network.intake``: trace acceptance rules and crediting; ``network.model_files``: serving models.

Never imports ``client`` or ``ui``.
"""
