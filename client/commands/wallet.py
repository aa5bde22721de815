"""`tracemill wallet show|address|backup|restore|export-csv`: thin over wallet/ (tested there)."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
from pathlib import Path
from typing import Any

from client.paths import Paths
from client.prompts import ask_new_passphrase, on_terminal
from client.session import open_identity

__all__ = ["register", "BACKUP_PASSPHRASE_ENV"]

log = logging.getLogger(__name__)

#: A backup's passphrase for scripts and tests (otherwise it is asked on the terminal).
BACKUP_PASSPHRASE_ENV = "TRACEMILL_BACKUP_PASSPHRASE"


def _network_options(p: argparse.ArgumentParser, *, inherit: bool) -> None:
    # On sub-actions SUPPRESS keeps a `tracemill wallet --network URL show` value from being reset.
    default = argparse.SUPPRESS if inherit else None
    p.add_argument("--network", metavar="URL", default=default,
                   help="the network node (default: the configured one, else the embedded local node)")
    p.add_argument("--offline", action="store_true", default=argparse.SUPPRESS if inherit else False,
                   help="show the local cache without asking the network")


def register(sub: Any) -> None:
    p = sub.add_parser("wallet", help="your address, balance, backups and earnings history")
    _network_options(p, inherit=False)
    p.set_defaults(func=run_show)
    actions = p.add_subparsers(dest="wallet_action", metavar="ACTION")
    show = actions.add_parser("show", help="balance, pending/accepted/rejected work and why (default)")
    _network_options(show, inherit=True)
    show.set_defaults(func=run_show)
    address = actions.add_parser("address", help="print your wallet address")
    address.add_argument("--hex", action="store_true", help="print the raw public key in hex instead")
    address.set_defaults(func=run_address)
    backup = actions.add_parser("backup", help="write an encrypted backup file, or show the recovery phrase")
    backup.add_argument("file", nargs="?", type=Path, help="where to write it (default: a dated name here)")
    backup.add_argument("--phrase", action="store_true", help="show the 24-word recovery phrase instead")
    backup.add_argument("--overwrite", action="store_true", help="replace an existing file")
    backup.set_defaults(func=run_backup)
    restore = actions.add_parser("restore", help="restore your key from a backup file or recovery phrase")
    restore.add_argument("file", nargs="?", type=Path, help="the backup file")
    restore.add_argument("--phrase", action="store_true", help="type the recovery phrase instead")
    restore.add_argument("--expect-address", metavar="ADDRESS", help="refuse unless it restores this address")
    restore.add_argument("--yes", action="store_true",
                         help="replace this home's existing key without asking (the old one is kept)")
    restore.set_defaults(func=run_restore)
    export = actions.add_parser("export-csv", help="export your earnings history as CSV")
    export.add_argument("file", type=Path, help="the CSV file to write")
    _network_options(export, inherit=True)
    export.set_defaults(func=run_export)


# -- prompts -------------------------------------------------------------------------------------


def _backup_passphrase(*, new: bool) -> str:
    from wallet.errors import NoPassphraseError

    value = os.environ.get(BACKUP_PASSPHRASE_ENV)
    if not value and on_terminal():
        value = ask_new_passphrase("this backup") if new else getpass.getpass("Backup passphrase: ")
    if not value:
        raise NoPassphraseError(
            f"A backup passphrase is needed: run in a terminal to type it, or set {BACKUP_PASSPHRASE_ENV}."
        )
    return value


def _info(paths: Paths) -> Any:
    """identity.json's public facts, making the identity first if this home has none."""
    from wallet.keystore import read_info

    info = read_info(paths.wallet_dir)
    if info is None:
        open_identity(paths)
        info = read_info(paths.wallet_dir)
    return info


# -- actions -------------------------------------------------------------------------------------


def _network_label(args: argparse.Namespace, paths: Paths) -> str:
    """The cache key of a network: its URL, or "local" for the embedded node (whose port changes)."""
    from client.config import load_config

    url = getattr(args, "network", None) or load_config(paths.config_file).network_url
    return url.rstrip("/") if url else "local"


def _sync(args: argparse.Namespace, paths: Paths, cache: Any, info: Any) -> str | None:
    """Bring the ledger cache up to date from the node; the reason it could not, or None."""
    from client.api import NodeClient, NodeError
    from client.network import resolve_network

    if getattr(args, "offline", False):
        return "you asked for --offline"
    try:
        with resolve_network(args, paths) as url, NodeClient(url) as node:
            cache.sync(node.balance(info.public_key, limit=1000), network=_network_label(args, paths))
    except NodeError as exc:
        log.info("wallet sync failed: %s", exc)
        return str(exc)
    return None


def _pending(paths: Paths) -> int:
    if not paths.outbox_db.exists():
        return 0
    from client.outbox import Outbox

    box = Outbox(paths.outbox_db)
    try:
        return int(box.stats().queued)
    finally:
        box.close()


def run_show(args: argparse.Namespace) -> int:
    from wallet.ledger import LedgerCache
    from wallet.view import build_view, render_text

    paths = Paths.default()
    info = _info(paths)
    with LedgerCache.in_wallet(paths.wallet_dir) as cache:
        error = _sync(args, paths, cache, info)
        view = build_view(cache, info, network=_network_label(args, paths), pending=_pending(paths),
                          sync_error=error)
    print(render_text(view))
    return 0


def run_address(args: argparse.Namespace) -> int:
    info = _info(Paths.default())
    print(info.public_key if args.hex else info.address)
    return 0


def run_backup(args: argparse.Namespace) -> int:
    from wallet.backup import default_backup_name, recovery_phrase, write_backup

    identity, where = open_identity(Paths.default())
    if args.phrase:
        if not sys.stdout.isatty():
            from wallet.errors import WalletError

            raise WalletError("The recovery phrase is only shown on a terminal, so it never lands in a file "
                              "or a log; run `tracemill wallet backup --phrase` in a terminal.")
        print(f"Recovery phrase for {identity.address}. Write it on paper and keep it safe; anyone with "
              "these words owns your earnings:\n")
        print(recovery_phrase(identity) + "\n")
        return 0
    target = args.file or Path.cwd() / default_backup_name(identity)
    write_backup(identity, target, _backup_passphrase(new=True), overwrite=args.overwrite)
    print(f"Backup of {identity.address} written to {target} (encrypted; your key itself is in the {where}).")
    print("Keep a copy off this computer; restore it with `tracemill wallet restore FILE`.")
    return 0


def _read_phrase() -> str:
    if on_terminal():
        return getpass.getpass("Recovery phrase (24 words, not shown): ")
    return sys.stdin.readline()


def run_restore(args: argparse.Namespace) -> int:
    from wallet.backup import identity_from_phrase, read_backup, restore_identity
    from wallet.errors import WalletError
    from wallet.keystore import read_info

    if bool(args.file) == bool(args.phrase):
        raise WalletError("Name a backup file, or give --phrase to type the recovery phrase (not both).")
    if args.phrase:
        identity = identity_from_phrase(_read_phrase(), expected_address=args.expect_address)
    else:
        identity = read_backup(args.file, _backup_passphrase(new=False))
        if args.expect_address and identity.address != args.expect_address.strip().lower():
            raise WalletError(f"{args.file} holds {identity.address}, not {args.expect_address}.")
    paths = Paths.default().ensure()
    current = read_info(paths.wallet_dir)
    force = args.yes
    if current is not None and current.public_key != identity.public_key_hex and not force and on_terminal():
        answer = input(f"This home's key is {current.address}. Replace it with {identity.address}? "
                       "The old key is kept, encrypted, in wallet/replaced/. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing changed.")
            return 1
        force = True
    asked: list[str | None] = []

    def new_passphrase() -> str | None:
        # Encrypts the restored key.enc (no OS keyring) or the kept copy of a keyring key: asked once.
        if not asked:
            asked.append(ask_new_passphrase("this computer's copy of the key"))
        return asked[0]

    result = restore_identity(paths.wallet_dir, identity, force=force, passphrase=new_passphrase)
    if result.unchanged:
        print(f"{identity.address} is already this home's key ({result.description}); nothing changed.")
        return 0
    print(f"Restored {identity.address}; the key is in the {result.description}.")
    if result.replaced:
        print(f"The previous key is kept, encrypted, in {result.replaced}.")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from wallet.ledger import LedgerCache

    paths = Paths.default()
    info = _info(paths)
    with LedgerCache.in_wallet(paths.wallet_dir) as cache:
        error = _sync(args, paths, cache, info)
        rows = cache.export_csv(args.file, info.public_key, network=_network_label(args, paths))
    if error:
        print(f"note: exported the cached history only ({error})", file=sys.stderr)
    print(f"{rows} ledger entries written to {args.file}")
    return 0
