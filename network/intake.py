"""Trace intake: check each uploaded trace against its lease, re-verify it, and credit the ledger.

The network never trusts the client: the node rebuilds nothing from the upload but the completion. The
task comes from the node's own lease record, and the verdict is the node's own (``verifier.verify``).
Runs in a worker thread (math verification spawns processes and can take seconds).
"""

from __future__ import annotations

import logging

from network.config import NodeConfig
from network.storage import Status, Storage
from protocol import SCHEMA_VERSION, BatchReceipt, Receipt, SignedTrace, Verdict

__all__ = ["SCORE_TOLERANCE", "Rejection", "process_batch"]

log = logging.getLogger(__name__)

#: a claimed score may differ from the node's by at most this much
SCORE_TOLERANCE = 1e-6


class Rejection(Exception):
    """Why a trace is refused: ``code`` is from docs/protocol.md; ``detail`` is for people."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(code, detail)
        self.code = code
        self.detail = detail

    @property
    def reason(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code


def _already_credited() -> Rejection:
    return Rejection(
        "sample_already_credited", "another trace was already credited for this (lease, task, sample_index)"
    )


def process_batch(
    storage: Storage, config: NodeConfig, signer: str, traces: list[SignedTrace], *, now: float
) -> BatchReceipt:
    """One receipt per trace, in order. ``signer`` is the public key that signed the upload request."""
    return BatchReceipt(receipts=[_process_one(storage, config, signer, s, now=now) for s in traces])


def _process_one(
    storage: Storage, config: NodeConfig, signer: str, signed: SignedTrace, *, now: float
) -> Receipt:
    from wallet.signing import verify_trace

    trace = signed.trace
    trace_id = trace.trace_id
    # Traces that cannot be attributed to the uploader are refused without a record: storing them would
    # let anyone write into another contributor's ledger, or squat on the id of someone's real trace.
    if not verify_trace(signed):
        return _unrecorded(
            trace_id, "bad_trace_signature", "the trace's signature does not match its content"
        )
    if trace.contributor != signer:
        return _unrecorded(
            trace_id, "contributor_mismatch", "the trace is signed by another key than the upload request"
        )

    previous = storage.get_trace(trace_id)
    if previous is not None:
        return _duplicate(trace_id, previous.status, previous.reason)

    node_score: float | None = None
    status: Status
    try:
        node_score = _check_and_verify(storage, config, signed, now=now)
    except Rejection as rej:
        status, reason, credit = "rejected", rej.reason, 0.0
    else:
        status, reason, credit = "accepted", "", config.credit.credit(node_score)

    stored = storage.record_trace(
        signed,
        status=status,
        reason=reason,
        credit=credit,
        node_score=node_score,
        now=now,
        already_credited=_already_credited().reason,
    )
    if stored is None:  # the same trace arrived concurrently and was stored first
        again = storage.get_trace(trace_id)
        return _duplicate(trace_id, again.status if again else "accepted", again.reason if again else "")
    log.info("trace %s from %s…: %s %s", trace_id[:12], signer[:12], stored.status, stored.reason)
    return Receipt(trace_id=trace_id, status=stored.status, reason=stored.reason, credit=stored.credit)


def _check_and_verify(storage: Storage, config: NodeConfig, signed: SignedTrace, *, now: float) -> float:
    """Raise Rejection for a trace the node does not pay for; returns the node's score otherwise."""
    import verifier

    trace = signed.trace
    if trace.schema_version != SCHEMA_VERSION:
        raise Rejection("unsupported_schema_version", f"this node speaks trace schema {SCHEMA_VERSION}")
    if len(trace.token_ids) != len(trace.logprobs):
        raise Rejection("malformed_trace", "token_ids and logprobs must have one entry per token")
    lease = storage.get_lease(trace.lease_id)
    if lease is None:
        raise Rejection("unknown_lease", f"no lease {trace.lease_id!r} on this node")
    if lease.contributor != trace.contributor:
        raise Rejection("lease_not_yours", "the lease was given to another contributor")
    task = lease.tasks.get(trace.task_id)
    if task is None:
        raise Rejection("task_not_in_lease", f"task {trace.task_id!r} is not part of this lease")
    if trace.sample_index >= task.group_size:
        raise Rejection(
            "bad_sample_index", f"sample_index {trace.sample_index} is not below group_size {task.group_size}"
        )
    if trace.seed != lease.seed:
        raise Rejection("seed_mismatch", "the trace's seed is not the one the lease assigned")
    if trace.model_sha256 != lease.model_sha256:
        raise Rejection("model_mismatch", "the trace names another model than the lease")
    if now > lease.expires_at + config.lease_grace_seconds:
        raise Rejection("lease_expired", "the lease expired before this upload; lease new tasks")
    if storage.sample_credited(trace.lease_id, trace.task_id, trace.sample_index):
        raise _already_credited()

    try:
        verdict = verifier.verify(task, trace.completion)
    except Exception as exc:  # our failure, not the contributor's: keep the traceback, say so
        log.exception("re-verifying trace %s failed", trace.trace_id)
        raise Rejection(
            "verifier_error", f"the node could not verify this trace ({type(exc).__name__})"
        ) from exc
    _compare(trace.verdict, verdict)
    return verdict.score


def _compare(claimed: Verdict, node: Verdict) -> None:
    if claimed.passed != node.passed or abs(claimed.score - node.score) > SCORE_TOLERANCE:
        raise Rejection(
            "verdict_mismatch",
            f"the node's verifier says passed={node.passed} score={node.score:g}"
            f" ({node.reason or 'no reason given'}); the trace claims passed={claimed.passed}"
            f" score={claimed.score:g}",
        )


def _unrecorded(trace_id: str, code: str, detail: str) -> Receipt:
    return Receipt(trace_id=trace_id, status="rejected", reason=Rejection(code, detail).reason)


def _duplicate(trace_id: str, status: str, reason: str) -> Receipt:
    detail = f"already received and {status}" + (f" ({reason})" if reason else "")
    return Receipt(trace_id=trace_id, status="duplicate", reason=detail, credit=0.0)
