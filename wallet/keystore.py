"""Where the private key lives: the OS keyring first, an encrypted file second (Vorta's pattern: pick a
backend by priority and say which one holds the key).

``wallet_dir/identity.json`` holds only public facts: the public key, the address, which backend holds
the secret and, for the keyring, the random keystore id the entry is filed under (so several homes on
one machine never share or overwrite an entry). ``wallet_dir/key.enc`` is the encrypted-file backend.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wallet.errors import CorruptFileError, KeystoreError
from wallet.files import atomic_write, ensure_private_dir
from wallet.identity import SEED_LEN, Identity
from wallet.passphrase import obtain_passphrase, require_strong
from wallet.sealed import KdfParams, read_sealed, write_sealed

__all__ = [
    "IDENTITY_FILE",
    "KEY_FILE",
    "KEYRING_SERVICE",
    "KEYSTORE_ENV",
    "FILE_BACKEND",
    "KeystoreInfo",
    "KeyringStore",
    "find_keyring",
    "read_info",
    "load_identity",
    "load_or_create_identity",
    "store_identity",
]

log = logging.getLogger(__name__)

IDENTITY_FILE = "identity.json"
KEY_FILE = "key.enc"
KEYRING_SERVICE = "tracemill"
#: ``auto`` (default: keyring if usable, else file), ``keyring`` (fail without one) or ``file``.
KEYSTORE_ENV = "TRACEMILL_KEYSTORE"
FILE_BACKEND = "encrypted file"
_SECRET_PREFIX = "tracemill-seed-v1:"

_DESCRIPTIONS = {
    "keyring.backends.SecretService": "OS keyring (Secret Service)",
    "keyring.backends.libsecret": "OS keyring (Secret Service)",
    "keyring.backends.macOS": "OS keyring (macOS Keychain)",
    "keyring.backends.Windows": "OS keyring (Windows Credential Manager)",
    "keyring.backends.kwallet": "OS keyring (KWallet)",
}


@dataclass(frozen=True)
class KeystoreInfo:
    """The public contents of identity.json."""

    public_key: str
    address: str
    backend: str  # "keyring" or "file"
    description: str  # in words, for the user
    keystore_id: str
    created_at: int

    def to_json(self) -> bytes:
        doc = {"version": 1, **self.__dict__, "keyring_service": KEYRING_SERVICE}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


class KeyringStore:
    """One usable OS keyring backend."""

    def __init__(self, backend: Any, description: str) -> None:
        self.backend = backend
        self.description = description

    def put(self, keystore_id: str, identity: Identity) -> None:
        self.backend.set_password(KEYRING_SERVICE, keystore_id, _SECRET_PREFIX + identity.seed_bytes().hex())

    def get(self, keystore_id: str) -> Identity | None:
        value = self.backend.get_password(KEYRING_SERVICE, keystore_id)
        if value is None:
            return None
        if not value.startswith(_SECRET_PREFIX) or len(value) != len(_SECRET_PREFIX) + 2 * SEED_LEN:
            raise KeystoreError("The OS keyring entry for this wallet is damaged; restore from a backup.")
        return Identity.from_seed(bytes.fromhex(value[len(_SECRET_PREFIX) :]))

    def delete(self, keystore_id: str) -> None:
        with contextlib.suppress(Exception):
            self.backend.delete_password(KEYRING_SERVICE, keystore_id)


def _describe(backend: Any) -> str | None:
    """A description for backends that keep secrets in an OS-protected store; None for the rest
    (fail, null, chainer, and third-party ones such as keyrings.alt's plaintext file)."""
    module = type(backend).__module__
    for prefix, words in _DESCRIPTIONS.items():
        if module == prefix or module.startswith(prefix + "."):
            return words
    return None


def _candidates() -> Iterator[Any]:
    import keyring
    from keyring.backends.chainer import ChainerBackend

    try:
        chosen = keyring.get_keyring()
    except Exception as exc:  # a broken keyring config must not stop the app
        log.info("no OS keyring: %s", type(exc).__name__)
        return
    for backend in chosen.backends if isinstance(chosen, ChainerBackend) else [chosen]:
        try:
            priority = float(backend.priority)
        except Exception:
            continue
        if priority > 0 and _describe(backend):
            yield backend


def find_keyring(*, probe: bool = True) -> KeyringStore | None:
    """The OS keyring if one is usable here: a secure backend that (with ``probe``) passes a
    write/read/delete round trip. Reading an existing key skips the probe and reports the read's error."""
    if os.environ.get(KEYSTORE_ENV, "auto").lower() == "file":
        return None
    for backend in _candidates():
        if not probe:
            return KeyringStore(backend, _describe(backend) or "OS keyring")
        probe_id, value = f"probe-{secrets.token_hex(8)}", secrets.token_hex(16)
        try:
            backend.set_password(KEYRING_SERVICE, probe_id, value)
            ok = backend.get_password(KEYRING_SERVICE, probe_id) == value
            backend.delete_password(KEYRING_SERVICE, probe_id)
        except Exception as exc:
            log.info("OS keyring %s not usable: %s", type(backend).__name__, type(exc).__name__)
            continue
        if ok:
            return KeyringStore(backend, _describe(backend) or "OS keyring")
    return None


def read_info(wallet_dir: Path) -> KeystoreInfo | None:
    """identity.json's public facts, or None when this home has no identity yet."""
    path = Path(wallet_dir) / IDENTITY_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return KeystoreInfo(
            public_key=str(doc["public_key"]),
            address=str(doc["address"]),
            backend=str(doc["backend"]),
            description=str(doc["description"]),
            keystore_id=str(doc["keystore_id"]),
            created_at=int(doc["created_at"]),
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        raise CorruptFileError(
            f"{path} is damaged; restore your wallet with `tracemill wallet restore`."
        ) from None


@contextlib.contextmanager
def _locked(wallet_dir: Path) -> Iterator[None]:
    """Serialize key creation between processes (the GUI and a CLI started at once)."""
    ensure_private_dir(wallet_dir)
    try:
        import fcntl
    except ImportError:  # Windows: creation races there are left to the single-instance GUI
        yield
        return
    with open(wallet_dir / ".lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def load_identity(
    wallet_dir: Path, info: KeystoreInfo, *, passphrase: Callable[[], str | None] | None = None
) -> Identity:
    """Unlock the identity identity.json points at, checking it matches the public key recorded there."""
    wallet_dir = Path(wallet_dir)
    if info.backend == "keyring":
        if os.environ.get(KEYSTORE_ENV, "auto").lower() == "file":
            raise KeystoreError(f"{KEYSTORE_ENV}=file, but this wallet's key is in the {info.description}; "
                                f"unset {KEYSTORE_ENV}, or restore the key from a backup.")
        store = find_keyring(probe=False)
        if store is None:
            raise KeystoreError(
                f"Your key is in the {info.description}, which cannot be reached now: log in to your desktop "
                "session (or unlock the keyring), or restore from a backup with `tracemill wallet restore`."
            )
        try:
            identity = store.get(info.keystore_id)
        except KeystoreError:
            raise
        except Exception as exc:
            raise KeystoreError(f"The {info.description} refused to give the key ({type(exc).__name__}); "
                                "unlock it and try again.") from None
        if identity is None:
            raise KeystoreError(
                f"The {info.description} has no entry for this wallet ({info.address}); "
                "restore it with `tracemill wallet restore`."
            )
    elif info.backend == "file":
        secret = obtain_passphrase(passphrase, purpose=f"unlock your wallet key ({wallet_dir / KEY_FILE})")
        identity = read_sealed(wallet_dir / KEY_FILE, secret)
    else:
        raise CorruptFileError(f"{wallet_dir / IDENTITY_FILE} names an unknown key store {info.backend!r}.")
    if identity.public_key_hex != info.public_key:
        raise KeystoreError(
            f"The stored key does not match {wallet_dir / IDENTITY_FILE}; restore from a backup."
        )
    return identity


def store_identity(
    wallet_dir: Path,
    identity: Identity,
    *,
    passphrase: Callable[[], str | None] | None = None,
    kdf: KdfParams | None = None,
) -> KeystoreInfo:
    """Put ``identity``'s secret in the best backend, then write identity.json pointing at it.

    Overwrites what identity.json said before; callers that replace a key keep the old one first.
    """
    wallet_dir = ensure_private_dir(Path(wallet_dir))
    mode = os.environ.get(KEYSTORE_ENV, "auto").lower()
    keystore_id = secrets.token_hex(16)
    store = find_keyring()
    if store is not None:
        try:
            store.put(keystore_id, identity)
            if store.get(keystore_id) != identity:
                raise KeystoreError("keyring round trip returned another key")
            backend, description = "keyring", store.description
        except Exception as exc:
            log.warning("could not store the key in the %s (%s); using an encrypted file",
                        store.description, type(exc).__name__)
            store.delete(keystore_id)
            store = None
    if store is None:
        if mode == "keyring":
            raise KeystoreError(
                f"{KEYSTORE_ENV}=keyring but no usable OS keyring was found; unlock or install one "
                f"(Secret Service, Keychain, Credential Manager), or unset {KEYSTORE_ENV}."
            )
        secret = obtain_passphrase(passphrase, purpose="encrypt your wallet key (no OS keyring is available)")
        require_strong(secret)
        write_sealed(wallet_dir / KEY_FILE, identity, secret, kdf=kdf)
        backend, description = "file", FILE_BACKEND
    info = KeystoreInfo(identity.public_key_hex, identity.address, backend, description, keystore_id,
                        int(time.time()))
    atomic_write(wallet_dir / IDENTITY_FILE, info.to_json(), mode=0o644)
    if backend == "keyring":
        # A key.enc left from an earlier file-backed identity would mislead; it is replaced, not kept.
        with contextlib.suppress(FileNotFoundError):
            (wallet_dir / KEY_FILE).unlink()
    log.info("wallet key for %s is in the %s", identity.address, description)
    return info


def load_or_create_identity(
    wallet_dir: Path,
    *,
    passphrase: Callable[[], str | None] | None = None,
    kdf: KdfParams | None = None,
) -> tuple[Identity, str]:
    """This home's identity, made on first run; and, in words, which backend holds its key.

    ``passphrase`` is asked only when the encrypted file is used ($TRACEMILL_PASSPHRASE wins when set).
    ``kdf`` lowers the scrypt cost of a new key file (tests only; the default is strong).
    """
    wallet_dir = Path(wallet_dir)
    with _locked(wallet_dir):
        info = read_info(wallet_dir)
        if info is None and (wallet_dir / KEY_FILE).exists():
            # A crash between writing key.enc and identity.json: keep that key rather than make a new one.
            purpose = f"unlock your wallet key ({wallet_dir / KEY_FILE})"
            secret = obtain_passphrase(passphrase, purpose=purpose)
            identity = read_sealed(wallet_dir / KEY_FILE, secret)
            info = KeystoreInfo(identity.public_key_hex, identity.address, "file", FILE_BACKEND,
                                secrets.token_hex(16), int(time.time()))
            atomic_write(wallet_dir / IDENTITY_FILE, info.to_json(), mode=0o644)
            return identity, info.description
        if info is None:
            identity = Identity.generate()
            info = store_identity(wallet_dir, identity, passphrase=passphrase, kdf=kdf)
            return identity, info.description
    return load_identity(wallet_dir, info, passphrase=passphrase), info.description
