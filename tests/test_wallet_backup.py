"""Backups and recovery phrases restore the same identity elsewhere; mistakes fail cleanly and leave the
target untouched; restoring over a key needs confirmation and keeps the old key."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.keyscan import assert_no_key_material
from tests.test_keystore import FAST, GOOD, run_python
from wallet.backup import (
    REPLACED_DIR,
    identity_from_phrase,
    read_backup,
    recovery_phrase,
    restore_identity,
    write_backup,
)
from wallet.errors import (
    CorruptFileError,
    KeyExistsError,
    RecoveryPhraseError,
    WalletError,
    WeakPassphraseError,
    WrongPassphraseError,
)
from wallet.identity import Identity
from wallet.keystore import KEY_FILE, KEYSTORE_ENV, load_or_create_identity, read_info
from wallet.passphrase import PASSPHRASE_ENV
from wallet.sealed import peek_address
from wallet.signing import request_headers, verify_request

BACKUP_PW = "a different backup passphrase 7"


@pytest.fixture(autouse=True)
def file_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYSTORE_ENV, "file")
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_backup_in_one_home_restores_the_same_identity_in_another(tmp_path: Path) -> None:
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    me, _ = load_or_create_identity(home_a / "wallet", passphrase=lambda: GOOD, kdf=FAST)
    backup = write_backup(me, tmp_path / "me.tmkey", BACKUP_PW, kdf=FAST)
    assert peek_address(backup) == me.address

    restored = read_backup(backup, BACKUP_PW)
    result = restore_identity(home_b / "wallet", restored, passphrase=lambda: GOOD, kdf=FAST)
    assert result.identity == me and result.replaced is None
    again, where = load_or_create_identity(home_b / "wallet", passphrase=lambda: GOOD)
    assert again.address == me.address and where == "encrypted file"
    # Signing equivalence: Ed25519 is deterministic, and the node accepts either machine's requests.
    assert again.sign(b"same bytes") == me.sign(b"same bytes")
    h = request_headers(again, "GET", "/v1/x", b"")
    assert verify_request(h, "GET", "/v1/x", b"", now=time.time()) == me.public_key_hex
    assert_no_key_material([home_a, home_b, backup], me)


def test_wrong_passphrase_fails_and_leaves_no_state(tmp_path: Path) -> None:
    me = Identity.generate()
    backup = write_backup(me, tmp_path / "me.tmkey", BACKUP_PW, kdf=FAST)
    with pytest.raises(WrongPassphraseError, match="Wrong passphrase") as err:
        read_backup(backup, BACKUP_PW.upper())
    assert "\n" not in str(err.value)
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("damage", ["ciphertext", "salt", "kdf", "truncate", "not json", "address", "empty"])
def test_corrupted_backup_is_reported_as_damaged(tmp_path: Path, damage: str) -> None:
    me = Identity.generate()
    backup = write_backup(me, tmp_path / "me.tmkey", BACKUP_PW, kdf=FAST)
    doc = json.loads(backup.read_text())
    if damage == "ciphertext":
        raw = bytearray(backup.read_bytes())
        i = raw.index(doc["ciphertext"].encode()) + 5
        raw[i] = ord("A") if raw[i] != ord("A") else ord("B")
        backup.write_bytes(bytes(raw))
    elif damage == "salt":
        doc["kdf"]["salt"] = "AAAA" + doc["kdf"]["salt"][4:]
        backup.write_text(json.dumps(doc))
    elif damage == "kdf":
        doc["kdf"]["n"] = 2**11
        backup.write_text(json.dumps(doc))
    elif damage == "address":
        doc["address"] = Identity.generate().address
        backup.write_text(json.dumps(doc))
    elif damage == "truncate":
        backup.write_bytes(backup.read_bytes()[:200])
    elif damage == "empty":
        backup.write_bytes(b"")
    else:
        backup.write_bytes(b"\x00\xffnot a backup")
    with pytest.raises(CorruptFileError) as err:
        read_backup(backup, BACKUP_PW)
    assert "\n" not in str(err.value)


def test_hostile_scrypt_parameters_are_refused(tmp_path: Path) -> None:
    backup = write_backup(Identity.generate(), tmp_path / "me.tmkey", BACKUP_PW, kdf=FAST)
    doc = json.loads(backup.read_text())
    doc["kdf"]["n"] = 2**30
    backup.write_text(json.dumps(doc))
    with pytest.raises(CorruptFileError):
        read_backup(backup, BACKUP_PW)


def test_write_backup_refuses_weak_passphrase_and_existing_file(tmp_path: Path) -> None:
    me = Identity.generate()
    with pytest.raises(WeakPassphraseError):
        write_backup(me, tmp_path / "b.tmkey", "1234", kdf=FAST)
    assert not (tmp_path / "b.tmkey").exists()
    write_backup(me, tmp_path / "b.tmkey", BACKUP_PW, kdf=FAST)
    with pytest.raises(WalletError, match="already exists"):
        write_backup(me, tmp_path / "b.tmkey", BACKUP_PW, kdf=FAST)
    write_backup(me, tmp_path / "b.tmkey", BACKUP_PW + "x", overwrite=True, kdf=FAST)
    assert read_backup(tmp_path / "b.tmkey", BACKUP_PW + "x") == me


def test_recovery_phrase_restores_the_same_address(tmp_path: Path) -> None:
    me = Identity.generate()
    phrase = recovery_phrase(me)
    assert len(phrase.split()) == 24
    assert identity_from_phrase(phrase) == me
    assert identity_from_phrase("  " + phrase.upper().replace(" ", "   ") + "\n") == me
    assert identity_from_phrase(phrase, expected_address=me.address) == me
    restore_identity(tmp_path / "w", identity_from_phrase(phrase), passphrase=lambda: GOOD, kdf=FAST)
    assert load_or_create_identity(tmp_path / "w", passphrase=lambda: GOOD)[0].address == me.address


def test_recovery_phrase_with_one_word_changed_never_restores_the_key() -> None:
    from mnemonic import Mnemonic

    wordlist = Mnemonic("english").wordlist
    me = Identity.generate()
    words = recovery_phrase(me).split()
    caught = tried = 0
    for pos in range(24):
        for step in (1, 7, 500):
            changed = list(words)
            changed[pos] = wordlist[(wordlist.index(words[pos]) + step) % 2048]
            tried += 1
            try:
                other = identity_from_phrase(" ".join(changed))
            except RecoveryPhraseError as err:
                caught += 1
                assert "checksum" in str(err)
            else:
                # BIP39's 8-bit checksum lets about 1 in 256 through: a different key, never ours,
                # and the expected address catches it.
                assert other != me
                with pytest.raises(RecoveryPhraseError, match="gives address"):
                    identity_from_phrase(" ".join(changed), expected_address=me.address)
    assert caught >= tried * 0.9


def test_recovery_phrase_errors_name_positions_not_words() -> None:
    words = recovery_phrase(Identity.generate()).split()
    with pytest.raises(RecoveryPhraseError, match="24 words; this one has 23"):
        identity_from_phrase(" ".join(words[:-1]))
    words[4] = "notaword"
    with pytest.raises(RecoveryPhraseError, match="Word 5 is not") as err:
        identity_from_phrase(" ".join(words))
    assert words[0] not in str(err.value) and "notaword" not in str(err.value)


def test_restore_over_an_existing_key_asks_first_and_keeps_the_old_one(tmp_path: Path) -> None:
    wallet = tmp_path / "w"
    old, _ = load_or_create_identity(wallet, passphrase=lambda: GOOD, kdf=FAST)
    new = Identity.generate()
    before = snapshot(wallet)
    with pytest.raises(KeyExistsError, match="--yes") as err:
        restore_identity(wallet, new, passphrase=lambda: GOOD, kdf=FAST)
    assert old.address in str(err.value)
    assert snapshot(wallet) == before
    result = restore_identity(wallet, new, force=True, passphrase=lambda: BACKUP_PW, kdf=FAST)
    assert result.replaced is not None and result.replaced.parent == wallet / REPLACED_DIR
    assert time.strftime("%Y%m%d") in result.replaced.name
    # The old key is recoverable with its old passphrase; the new one is this home's key now.
    assert read_backup(result.replaced, GOOD) == old
    assert load_or_create_identity(wallet, passphrase=lambda: BACKUP_PW)[0] == new
    assert read_info(wallet).public_key == new.public_key_hex  # type: ignore[union-attr]
    assert_no_key_material([wallet], old)
    assert_no_key_material([wallet], new)


def test_a_refused_new_passphrase_changes_nothing(tmp_path: Path) -> None:
    wallet = tmp_path / "w"
    load_or_create_identity(wallet, passphrase=lambda: GOOD, kdf=FAST)
    before = snapshot(wallet)
    with pytest.raises(WeakPassphraseError):
        restore_identity(wallet, Identity.generate(), force=True, passphrase=lambda: "short", kdf=FAST)
    assert snapshot(wallet) == before and not (wallet / REPLACED_DIR).exists()


def test_restoring_the_same_key_again_changes_nothing(tmp_path: Path) -> None:
    wallet = tmp_path / "w"
    me, _ = load_or_create_identity(wallet, passphrase=lambda: GOOD, kdf=FAST)
    before = snapshot(wallet)
    result = restore_identity(wallet, me, passphrase=lambda: GOOD, kdf=FAST)
    assert result.unchanged and result.replaced is None and snapshot(wallet) == before
    assert (wallet / KEY_FILE).exists()


KEYRING_BACKUP = """
    from wallet.backup import write_backup, read_backup, restore_identity, recovery_phrase
    ident, where = load_or_create_identity(Path(os.environ["HOME_A"]) / "wallet", passphrase=None)
    write_backup(ident, Path(os.environ["BACKUP"]), os.environ["BACKUP_PW"], kdf=FAST)
    emit(where=where, address=ident.address, sig=ident.sign(b"hello").hex(), seed=ident.seed_bytes().hex())
"""
KEYRING_RESTORE = """
    from wallet.backup import read_backup, restore_identity
    from wallet.identity import Identity
    wallet = Path(os.environ["HOME_B"]) / "wallet"
    existing, _ = load_or_create_identity(wallet, passphrase=None)
    restored = read_backup(Path(os.environ["BACKUP"]), os.environ["BACKUP_PW"])
    from wallet.errors import KeyExistsError
    try:
        restore_identity(wallet, restored, passphrase=None)
        asked = False
    except KeyExistsError:
        asked = True
    pw = os.environ["BACKUP_PW"]
    result = restore_identity(wallet, restored, force=True, passphrase=lambda: pw, kdf=FAST)
    ident, where = load_or_create_identity(wallet, passphrase=None)
    kept = read_backup(result.replaced, os.environ["BACKUP_PW"])
    emit(where=where, address=ident.address, sig=ident.sign(b"hello").hex(), asked=asked,
         kept_is_old=kept == existing, replaced=str(result.replaced), old_seed=existing.seed_bytes().hex())
"""


def test_keyring_backup_restores_on_another_machine(tmp_path: Path) -> None:
    env = {"HOME_A": str(tmp_path / "a"), "HOME_B": str(tmp_path / "b"), "BACKUP": str(tmp_path / "me.tmkey"),
           "BACKUP_PW": BACKUP_PW}
    made = run_python(tmp_path, KEYRING_BACKUP, secret_service=True, **env)
    assert made["where"] == "OS keyring (Secret Service)"
    # Another machine: a new OS home and Secret Service, which already has a key of its own.
    got = run_python(tmp_path, KEYRING_RESTORE, secret_service=True, **env)
    assert got["where"] == "OS keyring (Secret Service)"
    assert got["address"] == made["address"] and got["sig"] == made["sig"]
    assert got["asked"] and got["kept_is_old"]
    assert not (tmp_path / "b" / "wallet" / KEY_FILE).exists()
    for seed in (made["seed"], got["old_seed"]):
        assert_no_key_material([tmp_path / "a", tmp_path / "b"], bytes.fromhex(seed))
