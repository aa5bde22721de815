"""The node's settings, each declared once with its type and default (STYLE.md #7)."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol import SamplingSettings

__all__ = ["DEFAULT_FAMILIES", "CreditRule", "NodeConfig"]

#: reasoning-gym families with short numeric answers, where even a tiny model (SmolLM2-135M) sometimes
#: gets it right (a GCD is often 1 or 2; letter counts are small), so its groups are not all failures.
DEFAULT_FAMILIES: tuple[str, ...] = (
    "chain_sum",
    "basic_arithmetic",
    "leg_counting",
    "gcd",
    "letter_counting",
)


@dataclass(frozen=True)
class CreditRule:
    """What an accepted trace earns: ``base + per_score * score`` (the node's own score).

    A failed sample that was honestly generated and verified still earns ``base``: GRPO needs the
    failures of a group as much as its successes. A rejected trace earns nothing.
    """

    base: float = 0.1
    per_score: float = 1.0

    def credit(self, score: float) -> float:
        return round(self.base + self.per_score * score, 9)


@dataclass(frozen=True)
class NodeConfig:
    """Everything an operator can tune about a node. The defaults run a useful local node."""

    name: str = "tracemill-reference-node"
    #: the task environment (a verifier name) and the families offered from it
    env: str = "reasoning_gym"
    families: tuple[str, ...] = DEFAULT_FAMILIES
    #: samples per task (GRPO group size) and the sampling settings every task carries
    group_size: int = 4
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    #: how long a lease is valid, and how late an upload against it is still taken
    lease_seconds: float = 1800.0
    lease_grace_seconds: float = 600.0
    max_tasks_per_lease: int = 16
    credit: CreditRule = field(default_factory=CreditRule)
    #: largest request body the node reads (bigger -> 413)
    max_body_bytes: int = 8 * 1024 * 1024
    #: how many ledger entries a balance answer carries at most
    max_balance_entries: int = 1000

    def __post_init__(self) -> None:
        if not self.families:
            raise ValueError("a node needs at least one task family")
        if not 1 <= self.group_size <= 64:
            raise ValueError("group_size must be between 1 and 64")
        if not 1 <= self.max_tasks_per_lease <= 32:
            raise ValueError("max_tasks_per_lease must be between 1 and 32")
        if self.lease_seconds <= 0 or self.lease_grace_seconds < 0:
            raise ValueError("lease_seconds must be positive and lease_grace_seconds not negative")
