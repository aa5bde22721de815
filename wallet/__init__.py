"""The user's wallet: Ed25519 identity, keystore (OS keyring, encrypted file), signing, backups and
the local cache of the earnings ledger. See docs/wallet.md."""
