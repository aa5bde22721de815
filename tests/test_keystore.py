"""The keystore: OS keyring (a REAL Secret Service: gnome-keyring under its own D-Bus session) and the
encrypted-file fallback. Keyring runs happen in subprocesses, each with a fresh HOME and session, so the
test process's own keyring detection (which keyring caches per process) is never involved."""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.keyscan import assert_no_key_material
from wallet.errors import (
    CorruptFileError,
    KeystoreError,
    NoPassphraseError,
    WeakPassphraseError,
    WrongPassphraseError,
)
from wallet.identity import Identity
from wallet.keystore import KEY_FILE, KEYSTORE_ENV, load_or_create_identity, read_info
from wallet.passphrase import PASSPHRASE_ENV, assess_passphrase
from wallet.sealed import DEFAULT_KDF, KdfParams

REPO = Path(__file__).resolve().parent.parent
FAST = KdfParams(n=2**10)  # tests only: the default (n=2**17) costs about half a second per use
GOOD = "correct horse battery staple 42"

# Every subprocess script starts with this.
PRELUDE = """
import json, os, sys
from pathlib import Path
from wallet.keystore import load_or_create_identity, read_info
from wallet.sealed import KdfParams
FAST = KdfParams(n=2**10)
def emit(**kw):
    print("RESULT " + json.dumps(kw))
"""


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PYTHONPATH": str(REPO),
           "LANG": "C.UTF-8", **extra}
    return env


def run_python(tmp_path: Path, code: str, *, secret_service: bool, **env: str) -> dict[str, Any]:
    """Run ``code`` (after PRELUDE) in a fresh python; with ``secret_service`` inside a new D-Bus session
    with gnome-keyring unlocked, else with no D-Bus session at all. Returns what it emit()ted."""
    home = tmp_path / f"os-home-{uuid.uuid4().hex[:8]}"
    home.mkdir()
    script = home / "script.py"
    script.write_text(PRELUDE + textwrap.dedent(code))
    cmd = [sys.executable, str(script)]
    if secret_service:
        missing = [t for t in ("dbus-run-session", "gnome-keyring-daemon") if shutil.which(t) is None]
        if missing:
            pytest.fail(
                f"{', '.join(missing)} not found: the keyring tests need a real Secret Service; "
                "install it with `apt-get install -y gnome-keyring dbus`"
            )
        unlock = 'printf %s "$KEYRING_PW" | gnome-keyring-daemon --unlock --components=secrets >/dev/null'
        cmd = ["dbus-run-session", "--", "sh", "-c", f'{unlock} && exec "$0" "$1"', *cmd]
        env = {"KEYRING_PW": "os-login-pw", **env}
    proc = subprocess.run(cmd, env=_clean_env(home, **env), capture_output=True, text=True, timeout=120)
    results = [line[7:] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not results:
        pytest.fail(f"subprocess failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(results[-1])


@pytest.fixture
def file_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process tests use the encrypted file whatever keyring the developer's desktop has."""
    monkeypatch.setenv(KEYSTORE_ENV, "file")
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)


# -- encrypted file ------------------------------------------------------------------------------


def test_file_keystore_creates_then_loads_the_same_key(tmp_path: Path, file_only: None) -> None:
    wallet = tmp_path / "wallet"
    me, where = load_or_create_identity(wallet, passphrase=lambda: GOOD, kdf=FAST)
    assert where == "encrypted file"
    again, where2 = load_or_create_identity(wallet, passphrase=lambda: GOOD)
    assert again == me and where2 == "encrypted file"
    info = read_info(wallet)
    assert info is not None and info.backend == "file" and info.address == me.address
    assert stat.S_IMODE((wallet / KEY_FILE).stat().st_mode) == 0o600
    doc = json.loads((wallet / KEY_FILE).read_text())
    assert doc["kdf"]["name"] == "scrypt" and len(doc["kdf"]["salt"]) >= 20 and doc["kdf"]["n"] == FAST.n
    assert_no_key_material([tmp_path], me)


def test_default_kdf_is_strong() -> None:
    assert DEFAULT_KDF.n >= 2**17 and DEFAULT_KDF.r >= 8 and DEFAULT_KDF.p >= 1


def test_passphrase_from_environment(
    tmp_path: Path, file_only: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSPHRASE_ENV, GOOD)
    me, _ = load_or_create_identity(tmp_path / "w", passphrase=None, kdf=FAST)
    monkeypatch.delenv(PASSPHRASE_ENV)
    assert load_or_create_identity(tmp_path / "w", passphrase=lambda: GOOD)[0] == me


def test_wrong_passphrase_is_a_clear_error(tmp_path: Path, file_only: None) -> None:
    load_or_create_identity(tmp_path / "w", passphrase=lambda: GOOD, kdf=FAST)
    with pytest.raises(WrongPassphraseError, match="Wrong passphrase") as err:
        load_or_create_identity(tmp_path / "w", passphrase=lambda: GOOD + "!")
    assert "\n" not in str(err.value)


def test_no_passphrase_anywhere_is_an_actionable_error(tmp_path: Path, file_only: None) -> None:
    with pytest.raises(NoPassphraseError) as err:
        load_or_create_identity(tmp_path / "w", passphrase=None, kdf=FAST)
    assert PASSPHRASE_ENV in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "w" / KEY_FILE).exists() and read_info(tmp_path / "w") is None
    with pytest.raises(NoPassphraseError):
        load_or_create_identity(tmp_path / "w", passphrase=lambda: "", kdf=FAST)


def test_weak_passphrase_is_refused_with_advice(tmp_path: Path, file_only: None) -> None:
    for weak in ("pw", "password123", "aaaaaaaaaa", "qwerty"):
        with pytest.raises(WeakPassphraseError):
            load_or_create_identity(tmp_path / "w", passphrase=functools.partial(str, weak), kdf=FAST)
    assert read_info(tmp_path / "w") is None
    assert assess_passphrase("pw").feedback and assess_passphrase("pw").score == 0
    assert assess_passphrase(GOOD).score >= 3
    assert assess_passphrase("Tr4ce-mill!Blue").acceptable


def test_damaged_key_file_and_identity_file_are_reported(tmp_path: Path, file_only: None) -> None:
    wallet = tmp_path / "w"
    load_or_create_identity(wallet, passphrase=lambda: GOOD, kdf=FAST)
    doc = json.loads((wallet / KEY_FILE).read_text())
    ct = doc["ciphertext"]
    doc["ciphertext"] = ("A" if ct[0] != "A" else "B") + ct[1:]
    (wallet / KEY_FILE).write_text(json.dumps(doc))
    with pytest.raises(CorruptFileError, match="damaged"):
        load_or_create_identity(wallet, passphrase=lambda: GOOD)
    (wallet / "identity.json").write_text("{not json")
    with pytest.raises(CorruptFileError, match="restore"):
        load_or_create_identity(wallet, passphrase=lambda: GOOD)


def test_key_file_that_does_not_match_identity_json_is_refused(tmp_path: Path, file_only: None) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    load_or_create_identity(a, passphrase=lambda: GOOD, kdf=FAST)
    load_or_create_identity(b, passphrase=lambda: GOOD, kdf=FAST)
    shutil.copy(b / KEY_FILE, a / KEY_FILE)
    with pytest.raises((KeystoreError, CorruptFileError)):
        load_or_create_identity(a, passphrase=lambda: GOOD)


def test_crash_before_identity_json_keeps_the_key(tmp_path: Path, file_only: None) -> None:
    wallet = tmp_path / "w"
    me, _ = load_or_create_identity(wallet, passphrase=lambda: GOOD, kdf=FAST)
    (wallet / "identity.json").unlink()
    assert load_or_create_identity(wallet, passphrase=lambda: GOOD)[0] == me


def test_keyring_required_but_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYSTORE_ENV, "keyring")
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    result = run_python(tmp_path, """
        from wallet.errors import KeystoreError
        try:
            load_or_create_identity(Path(sys.argv[0]).parent / "w", passphrase=lambda: "x" * 20, kdf=FAST)
            emit(error=None)
        except KeystoreError as e:
            emit(error=str(e))
    """, secret_service=False, TRACEMILL_KEYSTORE="keyring")
    assert result["error"] and "no usable OS keyring" in result["error"]


# -- OS keyring: real Secret Service -------------------------------------------------------------

CREATE_TWO_HOMES = """
    from wallet.signing import request_headers
    out = {}
    for name in ("home-a", "home-b"):
        ident, where = load_or_create_identity(Path(os.environ["WALLETS"]) / name / "wallet", passphrase=None)
        again, _ = load_or_create_identity(Path(os.environ["WALLETS"]) / name / "wallet", passphrase=None)
        out[name] = {"where": where, "pub": ident.public_key_hex, "same": again == ident,
                     "sig": ident.sign(b"hello").hex(), "seed": ident.seed_bytes().hex()}
    # The secret really is in the Secret Service, filed under this home's keystore id.
    import secretstorage
    conn = secretstorage.dbus_init()
    found = {}
    for name in ("home-a", "home-b"):
        info = read_info(Path(os.environ["WALLETS"]) / name / "wallet")
        items = list(secretstorage.search_items(conn, {"service": "tracemill", "username": info.keystore_id}))
        found[name] = [i.get_secret().decode().endswith(out[name]["seed"]) for i in items]
    emit(homes=out, found=found)
"""


def test_secret_service_holds_the_key_and_homes_never_collide(tmp_path: Path) -> None:
    wallets = tmp_path / "wallets"
    result = run_python(tmp_path, CREATE_TWO_HOMES, secret_service=True, WALLETS=str(wallets))
    homes = result["homes"]
    for name in ("home-a", "home-b"):
        assert homes[name]["where"] == "OS keyring (Secret Service)"
        assert homes[name]["same"]
        assert result["found"][name] == [True]
        wallet = wallets / name / "wallet"
        assert not (wallet / KEY_FILE).exists()
        info = read_info(wallet)
        assert info is not None and info.backend == "keyring" and info.public_key == homes[name]["pub"]
        assert_no_key_material([wallets], bytes.fromhex(homes[name]["seed"]))
    assert homes["home-a"]["pub"] != homes["home-b"]["pub"]
    assert read_info(wallets / "home-a" / "wallet").keystore_id != read_info(  # type: ignore[union-attr]
        wallets / "home-b" / "wallet").keystore_id


def test_without_secret_service_it_falls_back_to_the_encrypted_file(tmp_path: Path) -> None:
    code = """
        ident, where = load_or_create_identity(Path(os.environ["WALLET"]), passphrase=None, kdf=FAST)
        emit(where=where, pub=ident.public_key_hex)
    """
    wallet = tmp_path / "w"
    result = run_python(tmp_path, code, secret_service=False, WALLET=str(wallet), TRACEMILL_PASSPHRASE=GOOD)
    assert result["where"] == "encrypted file" and (wallet / KEY_FILE).exists()
    # A D-Bus session without a Secret Service in it is no keyring either.
    if shutil.which("dbus-run-session") is None:
        pytest.fail("dbus-run-session not found: install it with `apt-get install -y dbus`")
    home = tmp_path / "bare-home"
    home.mkdir()
    (home / "s.py").write_text(PRELUDE + textwrap.dedent(code))
    proc = subprocess.run(
        ["dbus-run-session", "--", sys.executable, str(home / "s.py")],
        env=_clean_env(home, WALLET=str(tmp_path / "w2"), TRACEMILL_PASSPHRASE=GOOD),
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"where": "encrypted file"' in proc.stdout


def test_a_locked_keyring_falls_back_to_the_encrypted_file(tmp_path: Path) -> None:
    # Locked, and no display for the unlock prompt: gnome-keyring dismisses it, so the round trip fails.
    result = run_python(tmp_path, """
        import secretstorage
        collection = secretstorage.get_default_collection(secretstorage.dbus_init())
        collection.lock()
        ident, where = load_or_create_identity(Path(os.environ["WALLET"]), passphrase=None, kdf=FAST)
        emit(locked=collection.is_locked(), where=where)
    """, secret_service=True, WALLET=str(tmp_path / "w"), TRACEMILL_PASSPHRASE=GOOD)
    assert result == {"locked": True, "where": "encrypted file"}
    assert (tmp_path / "w" / KEY_FILE).exists()


def test_keyring_key_unreachable_later_is_an_actionable_error(tmp_path: Path) -> None:
    wallets = tmp_path / "wallets"
    run_python(tmp_path, CREATE_TWO_HOMES, secret_service=True, WALLETS=str(wallets))
    result = run_python(tmp_path, """
        from wallet.errors import KeystoreError
        try:
            load_or_create_identity(Path(os.environ["WALLET"]), passphrase=lambda: "x" * 20)
            emit(error=None)
        except KeystoreError as e:
            emit(error=str(e))
    """, secret_service=False, WALLET=str(wallets / "home-a" / "wallet"))
    assert "OS keyring (Secret Service)" in result["error"] and "tracemill wallet restore" in result["error"]
    # A new Secret Service (another login keyring) has no entry for this wallet: also a clear error.
    result = run_python(tmp_path, """
        from wallet.errors import KeystoreError
        try:
            load_or_create_identity(Path(os.environ["WALLET"]), passphrase=None)
            emit(error=None)
        except KeystoreError as e:
            emit(error=str(e))
    """, secret_service=True, WALLET=str(wallets / "home-a" / "wallet"))
    assert "has no entry for this wallet" in result["error"]


def test_identity_repr_never_shows_the_key() -> None:
    me = Identity.generate()
    assert me.seed_bytes().hex() not in repr(me) + str(me)
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(me)
