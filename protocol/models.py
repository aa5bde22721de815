"""The wire contract between a Tracemill client and a network node (see docs/protocol.md).

pydantic is used because the node is FastAPI (one schema for validation and the OpenAPI document)
and every value that crosses the wire must be validated with a readable error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol.canonical import canonical_bytes, sha256_hex

__all__ = [
    "SCHEMA_VERSION",
    "Wire",
    "Contributor",
    "AcceptedModel",
    "SamplingSettings",
    "Task",
    "Lease",
    "LeaseRequest",
    "Verdict",
    "Trace",
    "SignedTrace",
    "TraceBatch",
    "Receipt",
    "BatchReceipt",
    "LedgerEntry",
    "Balance",
    "ErrorBody",
]

SCHEMA_VERSION = 1

HEX64 = r"^[0-9a-f]{64}$"
HEX128 = r"^[0-9a-f]{128}$"


class Wire(BaseModel):
    """Base of every wire object: unknown fields are refused, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def canonical(self) -> bytes:
        """Canonical bytes of this object (what ids and signatures are computed over)."""
        return canonical_bytes(self.model_dump(mode="json"))


class Contributor(Wire):
    public_key: str = Field(pattern=HEX64, description="Ed25519 public key, hex")
    registered_at: float


class AcceptedModel(Wire):
    """A model the network accepts traces from, and where to get it."""

    name: str = Field(min_length=1, max_length=200)
    filename: str = Field(pattern=r"^[A-Za-z0-9._-]+\.gguf$")
    url: str = Field(min_length=1, max_length=2000)
    sha256: str = Field(pattern=HEX64)
    size: int = Field(gt=0)
    quantization: str = ""
    context_length: int = Field(default=2048, gt=0)
    chat_template: str | None = None


class SamplingSettings(Wire):
    temperature: float = Field(default=0.8, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(default=256, gt=0, le=32768)


class Task(Wire):
    """One reasoning task. ``env`` names the verifier; ``verifier_data`` is what that verifier needs."""

    task_id: str = Field(min_length=1, max_length=200)
    env: str = Field(min_length=1, max_length=100, description="e.g. 'reasoning_gym', 'math', 'code'")
    family: str = Field(default="", max_length=100)
    prompt: str = Field(min_length=1, max_length=100_000)
    system_prompt: str = Field(default="", max_length=20_000)
    verifier_data: dict[str, Any] = Field(default_factory=dict)
    group_size: int = Field(default=4, ge=1, le=64)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)


class LeaseRequest(Wire):
    count: int = Field(default=1, ge=1, le=32)
    model_sha256: str = Field(pattern=HEX64)


class Lease(Wire):
    lease_id: str = Field(min_length=1, max_length=100)
    contributor: str = Field(pattern=HEX64)
    model_sha256: str = Field(pattern=HEX64)
    seed: int = Field(ge=0, lt=2**63, description="the sampling seed the node assigned")
    tasks: list[Task]
    issued_at: float
    expires_at: float


class Verdict(Wire):
    """A verifier's judgement of one completion."""

    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    reason: str = Field(default="", max_length=2000)
    verifier: str = Field(default="", max_length=100)
    verifier_version: str = Field(default="", max_length=50)
    elapsed_s: float = Field(default=0.0, ge=0.0)


class Trace(Wire):
    """One sampled completion of one task, as signed by its contributor."""

    schema_version: int = SCHEMA_VERSION
    lease_id: str = Field(min_length=1, max_length=100)
    task_id: str = Field(min_length=1, max_length=200)
    sample_index: int = Field(ge=0, lt=64)
    contributor: str = Field(pattern=HEX64)
    model_sha256: str = Field(pattern=HEX64)
    seed: int = Field(ge=0, lt=2**63)
    completion: str = Field(max_length=200_000)
    token_ids: list[int] = Field(default_factory=list, max_length=32768)
    logprobs: list[float] = Field(default_factory=list, max_length=32768)
    prompt_tokens: int = Field(ge=0)
    finish_reason: Literal["stop", "length", "cancelled"] = "stop"
    verdict: Verdict
    created_at: float

    @property
    def trace_id(self) -> str:
        """sha256 of the canonical bytes: the trace's identity everywhere."""
        return sha256_hex(self.canonical())


class SignedTrace(Wire):
    trace: Trace
    signature: str = Field(
        pattern=HEX128, description="Ed25519 over trace_signing_bytes(trace.canonical()), hex"
    )


class TraceBatch(Wire):
    traces: list[SignedTrace] = Field(min_length=1, max_length=256)


class Receipt(Wire):
    trace_id: str = Field(pattern=HEX64)
    status: Literal["accepted", "rejected", "duplicate"]
    reason: str = ""
    credit: float = 0.0


class BatchReceipt(Wire):
    receipts: list[Receipt]


class LedgerEntry(Wire):
    entry_id: int
    contributor: str = Field(pattern=HEX64)
    trace_id: str = Field(pattern=HEX64)
    task_id: str
    status: Literal["accepted", "rejected"]
    amount: float
    reason: str = ""
    created_at: float


class Balance(Wire):
    contributor: str = Field(pattern=HEX64)
    balance: float
    accepted: int
    rejected: int
    entries: list[LedgerEntry] = Field(default_factory=list)


class ErrorBody(Wire):
    """Every non-2xx answer of a node has this body."""

    code: str
    message: str
