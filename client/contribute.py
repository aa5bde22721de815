"""The contribution loop: lease → generate → verify → sign → queue → upload → receipt.

The loop knows nothing about Qt or the terminal: it reports through one callback that receives
:class:`LoopEvent` objects (the CLI prints them, the GUI turns them into signals). It stops between
steps when its ``cancel`` event is set, and within one decode step while generating.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from client.api import NetworkError, NodeClient, NodeError
from client.outbox import Outbox
from protocol import Lease, SignedTrace, Task, Trace, Verdict, task_seed

if TYPE_CHECKING:
    from inference.engine import Engine, GroupResult
    from wallet.identity import Identity

__all__ = ["ContributionLoop", "LoopEvent", "RunSummary"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopEvent:
    """Something the loop did. ``kind`` is one of: lease, task_started, task_done, uploaded,
    upload_failed, error, stopped."""

    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSummary:
    tasks: int = 0
    traces: int = 0
    passed: int = 0
    completion_tokens: int = 0
    decode_s: float = 0.0
    accepted: int = 0
    rejected: int = 0
    credits: float = 0.0
    queued: int = 0

    @property
    def pass_rate(self) -> float:
        return self.passed / self.traces if self.traces else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.decode_s if self.decode_s > 0 else 0.0

    def line(self) -> str:
        return (
            f"{self.tasks} tasks, {self.traces} traces, pass rate {self.pass_rate:.0%}, "
            f"{self.tokens_per_s:.1f} tokens/s, {self.accepted} accepted, {self.rejected} rejected, "
            f"{self.credits:.2f} credits earned"
            + (f", {self.queued} traces still queued for upload" if self.queued else "")
        )


def build_messages(task: Task) -> list[dict[str, str]]:
    """The chat messages a task's prompt becomes."""
    messages = []
    if task.system_prompt:
        messages.append({"role": "system", "content": task.system_prompt})
    messages.append({"role": "user", "content": task.prompt})
    return messages


class ContributionLoop:
    """Runs the loop against one node with one engine, model and identity."""

    def __init__(
        self,
        node: NodeClient,
        identity: Identity,
        engine: Engine,
        model_sha256: str,
        outbox: Outbox,
        *,
        verify: Callable[[Task, str], Verdict],
        tasks_per_lease: int = 2,
        upload_batch: int = 32,
        on_event: Callable[[LoopEvent], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.node = node
        self.identity = identity
        self.engine = engine
        self.model_sha256 = model_sha256
        self.outbox = outbox
        self.verify = verify
        self.tasks_per_lease = tasks_per_lease
        self.upload_batch = upload_batch
        self.on_event = on_event or (lambda e: None)
        self.cancel = cancel or threading.Event()
        self.summary = RunSummary()

    def _emit(self, kind: str, message: str, **data: Any) -> None:
        log.info("%s: %s", kind, message)
        self.on_event(LoopEvent(kind, message, data))

    def run(self, max_tasks: int | None = None) -> RunSummary:
        """Contribute until ``max_tasks`` tasks are done (None: until cancelled). Queued traces from
        an earlier run are uploaded first; whatever cannot be uploaded stays in the outbox."""
        self.flush()
        while not self.cancel.is_set() and (max_tasks is None or self.summary.tasks < max_tasks):
            want = self.tasks_per_lease if max_tasks is None else min(
                self.tasks_per_lease, max_tasks - self.summary.tasks
            )
            lease = self.node.lease(want, self.model_sha256)
            n = len(lease.tasks)
            self._emit("lease", f"leased {n} task{'' if n == 1 else 's'} (lease {lease.lease_id})",
                       lease_id=lease.lease_id, tasks=len(lease.tasks))
            for task in lease.tasks:
                if self.cancel.is_set():
                    break
                self.contribute_task(lease, task)
                self.flush()
        self.flush(final=True)
        self.summary.queued = self.outbox.stats().queued
        self._emit("stopped", self.summary.line(), summary=self.summary)
        return self.summary

    def contribute_task(self, lease: Lease, task: Task) -> list[SignedTrace]:
        """Generate the task's group, verify each sample, sign, and queue them in one transaction."""
        self._emit("task_started", f"task {task.task_id}: sampling {task.group_size}",
                   task_id=task.task_id, k=task.group_size)
        result: GroupResult = self.engine.generate_group(
            build_messages(task),
            task.group_size,
            seed=task_seed(lease.seed, task.task_id),
            temperature=task.sampling.temperature,
            top_p=task.sampling.top_p,
            max_tokens=task.sampling.max_tokens,
            cancel=self.cancel,
        )
        signed: list[SignedTrace] = []
        from wallet.signing import sign_trace

        for index, sample in enumerate(result.samples):
            if sample.finish_reason == "cancelled":
                continue  # an interrupted sample is not a trace of the task
            verdict = self.verify(task, sample.text)
            trace = Trace(
                lease_id=lease.lease_id,
                task_id=task.task_id,
                sample_index=index,
                contributor=self.identity.public_key_hex,
                model_sha256=self.model_sha256,
                seed=lease.seed,
                completion=sample.text,
                token_ids=list(sample.token_ids),
                logprobs=[round(float(x), 6) for x in sample.logprobs],
                prompt_tokens=result.prompt_tokens,
                finish_reason=sample.finish_reason,
                verdict=verdict,
                created_at=round(time.time(), 3),
            )
            signed.append(sign_trace(self.identity, trace))
        self.outbox.add(signed)
        s = self.summary
        s.tasks += 1
        s.traces += len(signed)
        passed = sum(t.trace.verdict.passed for t in signed)
        s.passed += passed
        s.completion_tokens += result.completion_tokens
        s.decode_s += result.decode_s
        self._emit(
            "task_done",
            f"task {task.task_id}: {passed}/{len(signed)} passed, {result.tokens_per_s:.1f} tokens/s",
            task_id=task.task_id, passed=passed, traces=len(signed),
            tokens_per_s=result.tokens_per_s, summary=s,
        )
        return signed

    def flush(self, final: bool = False, attempts: int = 4) -> None:
        """Upload queued traces in batches; retry with backoff on network errors (more when final)."""
        delay = 0.5
        tries = attempts if final else 1
        while True:
            batch = self.outbox.pending(self.upload_batch)
            if not batch:
                return
            try:
                receipt = self.node.upload(batch)
            except NodeError as exc:
                self.outbox.record_failure([t.trace.trace_id for t in batch], str(exc))
                self._emit("upload_failed", f"upload failed, traces kept in the outbox: {exc}")
                tries -= 1
                if tries <= 0 or not isinstance(exc, NetworkError):
                    return
                time.sleep(delay)
                delay = min(delay * 2, 8.0)
                continue
            self.outbox.acknowledge(receipt.receipts)
            answered = {r.trace_id for r in receipt.receipts}
            missing = [t.trace.trace_id for t in batch if t.trace.trace_id not in answered]
            acc = [r for r in receipt.receipts if r.status == "accepted"]
            rej = [r for r in receipt.receipts if r.status == "rejected"]
            self.summary.accepted += len(acc)
            self.summary.rejected += len(rej)
            self.summary.credits += sum(r.credit for r in acc)
            reasons = sorted({r.reason for r in rej})
            self._emit(
                "uploaded",
                f"uploaded {len(receipt.receipts)} traces: {len(acc)} accepted, {len(rej)} rejected"
                + (f" ({', '.join(reasons)})" if reasons else ""),
                accepted=len(acc), rejected=len(rej), summary=self.summary,
            )
            if missing:  # sending them again now would loop; they stay queued for the next flush
                self.outbox.record_failure(missing, "the node sent no receipt for these traces")
                self._emit("upload_failed", f"the node sent no receipt for {len(missing)} traces; "
                           "they stay in the outbox")
                return
