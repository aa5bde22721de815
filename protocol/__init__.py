"""Tracemill's wire protocol: typed objects, canonical bytes and ids. No I/O here."""

from protocol.canonical import canonical_bytes, sha256_hex
from protocol.models import (
    SCHEMA_VERSION,
    AcceptedModel,
    Balance,
    BatchReceipt,
    Contributor,
    ErrorBody,
    Lease,
    LeaseRequest,
    LedgerEntry,
    Receipt,
    SamplingSettings,
    SignedTrace,
    Task,
    Trace,
    TraceBatch,
    Verdict,
    Wire,
)
from protocol.signing import (
    AUTH_HEADERS,
    MAX_CLOCK_SKEW_S,
    request_signing_bytes,
    trace_signing_bytes,
)

__all__ = [
    "SCHEMA_VERSION",
    "AUTH_HEADERS",
    "MAX_CLOCK_SKEW_S",
    "AcceptedModel",
    "Balance",
    "BatchReceipt",
    "Contributor",
    "ErrorBody",
    "Lease",
    "LeaseRequest",
    "LedgerEntry",
    "Receipt",
    "SamplingSettings",
    "SignedTrace",
    "Task",
    "Trace",
    "TraceBatch",
    "Verdict",
    "Wire",
    "canonical_bytes",
    "request_signing_bytes",
    "sha256_hex",
    "trace_signing_bytes",
]
