"""Backups a user can keep: an encrypted backup file and a BIP39 recovery phrase, both restoring the same
address on another machine; and restoring over an existing key only when asked, keeping the old one."""

from __future__ import annotations

import functools
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mnemonic import Mnemonic

from wallet.errors import KeyExistsError, KeystoreError, RecoveryPhraseError, WalletError
from wallet.files import ensure_private_dir
from wallet.identity import SEED_LEN, Identity
from wallet.keystore import KEY_FILE, KeystoreInfo, find_keyring, load_identity, read_info, store_identity
from wallet.passphrase import obtain_passphrase, require_strong
from wallet.sealed import KdfParams, read_sealed, write_sealed

__all__ = [
    "BACKUP_SUFFIX",
    "REPLACED_DIR",
    "RestoreResult",
    "default_backup_name",
    "write_backup",
    "read_backup",
    "recovery_phrase",
    "identity_from_phrase",
    "restore_identity",
]

log = logging.getLogger(__name__)

BACKUP_SUFFIX = ".tmkey"
#: Keys replaced by a restore are kept here, encrypted, under a dated name.
REPLACED_DIR = "replaced"
_WORDS = Mnemonic("english")
_WORDSET = frozenset(_WORDS.wordlist)


@dataclass(frozen=True)
class RestoreResult:
    identity: Identity
    description: str  # which backend now holds the key, in words
    replaced: Path | None  # where the previous key was kept, if there was one
    unchanged: bool = False  # the same key was already this home's


def default_backup_name(identity: Identity) -> str:
    """A file name that says whose backup it is and when it was made."""
    return f"tracemill-{identity.address[:12]}-{time.strftime('%Y%m%d')}{BACKUP_SUFFIX}"


def write_backup(
    identity: Identity, path: Path, passphrase: str, *, overwrite: bool = False, kdf: KdfParams | None = None
) -> Path:
    """Write an encrypted backup of ``identity`` to ``path`` (atomically; refuses weak passphrases)."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise WalletError(f"{path} already exists; choose another file name or allow overwriting.")
    require_strong(passphrase)
    write_sealed(path, identity, passphrase, kdf=kdf)
    # Check it opens before telling the user it is safe.
    if read_sealed(path, passphrase) != identity:
        raise WalletError(f"The backup written to {path} does not read back; try another disk.")
    return path


def read_backup(path: Path, passphrase: str) -> Identity:
    """The identity in a backup (or key.enc) file: WrongPassphraseError or CorruptFileError otherwise."""
    return read_sealed(Path(path), passphrase)


def recovery_phrase(identity: Identity) -> str:
    """The 24 BIP39 English words that encode the 32-byte seed. Show it to the user only; never log it."""
    return str(_WORDS.to_mnemonic(identity.seed_bytes()))


def identity_from_phrase(phrase: str, *, expected_address: str | None = None) -> Identity:
    """The identity a recovery phrase gives.

    BIP39's checksum is 8 bits, so about 1 in 256 single-word mistakes still passes it; pass
    ``expected_address`` (from the user's records or an old backup) to catch those too.
    """
    words = phrase.lower().split()
    if len(words) != 24:
        raise RecoveryPhraseError(f"A recovery phrase has 24 words; this one has {len(words)}.")
    # Positions only: a word of the phrase is a piece of the key and must not reach a log.
    unknown = [str(i + 1) for i, w in enumerate(words) if w not in _WORDSET]
    if unknown:
        raise RecoveryPhraseError(
            f"Word {', '.join(unknown)} is not in the BIP39 English word list; check its spelling."
        )
    try:
        seed = bytes(_WORDS.to_entropy(words))
    except ValueError:
        raise RecoveryPhraseError(
            "Recovery phrase checksum does not match: a word is wrong or two are swapped; check each word."
        ) from None
    if len(seed) != SEED_LEN:
        raise RecoveryPhraseError("This phrase does not encode a Tracemill key.")
    identity = Identity.from_seed(seed)
    if expected_address is not None and identity.address != expected_address.strip().lower():
        raise RecoveryPhraseError(
            f"This phrase gives address {identity.address}, not {expected_address.strip()}; check each word."
        )
    return identity


def _keep_previous(
    wallet_dir: Path, info: KeystoreInfo, passphrase: Callable[[], str | None] | None, kdf: KdfParams | None
) -> Path | None:
    """Save the key about to be replaced as a dated encrypted file in wallet_dir/replaced/."""
    folder = ensure_private_dir(wallet_dir / REPLACED_DIR)
    target = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{info.address[:12]}{BACKUP_SUFFIX}"
    if info.backend == "file" and (wallet_dir / KEY_FILE).exists():
        shutil.copy2(wallet_dir / KEY_FILE, target)  # already encrypted, with the old passphrase
        return target
    try:
        old = load_identity(wallet_dir, info, passphrase=passphrase)
    except KeystoreError as exc:
        log.warning("the key being replaced (%s) cannot be read, so it cannot be kept: %s", info.address, exc)
        return None
    secret = obtain_passphrase(passphrase, purpose="encrypt a copy of the key being replaced")
    write_sealed(target, old, secret, kdf=kdf)
    return target


def restore_identity(
    wallet_dir: Path,
    identity: Identity,
    *,
    force: bool = False,
    passphrase: Callable[[], str | None] | None = None,
    kdf: KdfParams | None = None,
) -> RestoreResult:
    """Make ``identity`` this home's key.

    If another key is here, KeyExistsError unless ``force``; with ``force`` the old key is first kept in
    ``wallet_dir/replaced/`` (a dated encrypted file; key.enc is copied as is, a keyring key is encrypted
    with ``passphrase``). ``passphrase`` also encrypts the new key.enc when no OS keyring is usable.
    """
    wallet_dir = ensure_private_dir(Path(wallet_dir))
    info = read_info(wallet_dir)
    if info is not None and info.public_key == identity.public_key_hex:
        try:
            load_identity(wallet_dir, info, passphrase=passphrase)
            return RestoreResult(identity, info.description, None, unchanged=True)
        except KeystoreError:
            pass  # the keyring lost its entry: store it again below
    if find_keyring() is None:
        # The new key will go to key.enc: have a good passphrase before anything is touched.
        secret = obtain_passphrase(passphrase, purpose="encrypt the restored key (no OS keyring here)")
        require_strong(secret)
        passphrase = functools.partial(str, secret)
    replaced = None
    if info is not None and info.public_key != identity.public_key_hex:
        if not force:
            raise KeyExistsError(
                f"This home already has a wallet key ({info.address}); confirm replacing it "
                "(tracemill wallet restore --yes); the old key will be kept in wallet/replaced/."
            )
        replaced = _keep_previous(wallet_dir, info, passphrase, kdf)
    new_info = store_identity(wallet_dir, identity, passphrase=passphrase, kdf=kdf)
    if info is not None and info.backend == "keyring" and info.keystore_id != new_info.keystore_id:
        store = find_keyring()
        if store is not None and (replaced is not None or info.public_key == identity.public_key_hex):
            store.delete(info.keystore_id)
    log.info("restored wallet key %s into the %s", identity.address, new_info.description)
    return RestoreResult(identity, new_info.description, replaced)
