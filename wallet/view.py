"""What the wallet shows (CLI and GUI alike): the address, where the key is, the confirmed balance,
pending / accepted / rejected work, why work was rejected, earnings per day and recent history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

from protocol import LedgerEntry
from wallet.keystore import KeystoreInfo
from wallet.ledger import DayEarnings, LedgerCache, WalletSummary

__all__ = ["WalletView", "build_view", "render_text", "format_credits"]


@dataclass(frozen=True)
class WalletView:
    address: str
    public_key: str
    keystore: str  # which backend holds the key, in words
    network: str
    summary: WalletSummary
    rejection_reasons: list[tuple[str, int]]
    days: list[DayEarnings]  # newest last
    recent: list[LedgerEntry]  # newest first
    sync_error: str | None  # why the node could not be asked now (the cache is shown instead)


def format_credits(amount: float) -> str:
    return f"{amount:.2f}"


def build_view(
    cache: LedgerCache,
    info: KeystoreInfo,
    *,
    network: str,
    pending: int = 0,
    sync_error: str | None = None,
    days: int = 7,
    recent: int = 10,
    tz: tzinfo | None = None,
) -> WalletView:
    """Everything the wallet displays, from the ledger cache and the outbox's pending count."""
    key = info.public_key
    return WalletView(
        address=info.address,
        public_key=key,
        keystore=info.description,
        network=network,
        summary=cache.summary(key, network=network, pending=pending),
        rejection_reasons=cache.rejection_reasons(key, network=network),
        days=cache.earnings_per_day(key, network=network, tz=tz)[-days:] if days else [],
        recent=cache.history(key, network=network, limit=recent),
        sync_error=sync_error,
    )


def _when(ts: float, tz: tzinfo | None) -> str:
    return datetime.fromtimestamp(ts, tz=tz or datetime.now().astimezone().tzinfo).strftime("%Y-%m-%d %H:%M")


def render_text(view: WalletView, *, tz: tzinfo | None = None) -> str:
    """The wallet as plain text for a terminal."""
    s = view.summary
    lines = [
        f"Address:    {view.address}",
        f"Key store:  {view.keystore}",
        f"Network:    {view.network}",
        f"Balance:    {format_credits(s.confirmed_balance)} credits (confirmed by the network)",
        f"Work:       {s.accepted} accepted, {s.rejected} rejected, {s.pending} pending "
        "(signed, not yet receipted)",
    ]
    if s.synced_at is None:
        lines.append("Synced:     never")
    else:
        lines.append(f"Synced:     {_when(s.synced_at, tz)}")
    if view.sync_error:
        lines.append(f"Offline:    {view.sync_error} (showing the last synced figures)")
    if view.rejection_reasons:
        lines.append("Rejected, by reason:")
        lines += [f"  {n:5d}  {reason}" for reason, n in view.rejection_reasons]
    if view.days:
        lines.append("Earnings per day:")
        lines += [f"  {d.day}  {format_credits(d.credited):>10} credits  ({d.accepted} accepted, "
                  f"{d.rejected} rejected)" for d in view.days]
    if view.recent:
        lines.append("Recent work:")
        for e in view.recent:
            amount = f"+{format_credits(e.amount)}" if e.status == "accepted" else ""
            why = f"  {e.reason}" if e.reason else ""
            lines.append(f"  {_when(e.created_at, tz)}  {e.status:8}  {amount:>9}  {e.task_id}{why}")
    if not s.history_complete:
        lines.append(f"(the cache holds {s.cached_entries} of {s.accepted + s.rejected} ledger entries; "
                     "older ones are on the network)")
    return "\n".join(lines)
