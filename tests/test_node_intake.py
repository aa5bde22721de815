"""Trace intake on a real node: what it credits, what it refuses and why, and the ledger it keeps.

Completions are hand-written: the gold answer in <answer> tags for a pass, a wrong number for a fail.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from network.config import NodeConfig
from protocol import Lease, SignedTrace, Verdict
from tests.test_node_support import (
    Signer,
    completion_with,
    gold_answer,
    make_trace,
    running_node,
    write_model_file,
)

CONFIG = NodeConfig(families=("chain_sum", "leg_counting", "basic_arithmetic"), group_size=4)
PASS_CREDIT = CONFIG.credit.credit(1.0)  # 1.1 with the default rule
FAIL_CREDIT = CONFIG.credit.credit(0.0)  # 0.1


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_file(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, model: Path) -> Iterator[str]:
    with running_node(tmp_path_factory.mktemp("node") / "node.sqlite", model, CONFIG) as base:
        yield base


@pytest.fixture
def alice(url: str) -> Iterator[Signer]:
    s = Signer(url)
    yield s
    s.close()


@pytest.fixture
def bob(url: str) -> Iterator[Signer]:
    s = Signer(url)
    yield s
    s.close()


def lease_for(s: Signer, count: int = 2) -> Lease:
    sha = s.http.get("/v1/models").json()[0]["sha256"]
    return s.lease(sha, count)


def honest_pass(s: Signer, lease: Lease, sample_index: int = 0, task_no: int = 0) -> SignedTrace:
    task = lease.tasks[task_no]
    return make_trace(s.identity, lease, task, completion_with(gold_answer(task)), sample_index=sample_index)


def wrong_answer(task_answer: str) -> str:
    return str(int(task_answer) + 1) if task_answer.lstrip("-").isdigit() else task_answer + "x"


def test_honest_traces_are_credited(alice: Signer) -> None:
    lease = lease_for(alice)
    task = lease.tasks[0]
    good = honest_pass(alice, lease, 0)
    bad = make_trace(
        alice.identity, lease, task, completion_with(wrong_answer(gold_answer(task))), sample_index=1
    )
    assert good.trace.verdict.passed and not bad.trace.verdict.passed
    r_good, r_bad = alice.upload(good, bad)
    assert r_good == {
        "trace_id": good.trace.trace_id,
        "status": "accepted",
        "reason": "",
        "credit": PASS_CREDIT,
    }
    assert r_bad == {
        "trace_id": bad.trace.trace_id,
        "status": "accepted",
        "reason": "",
        "credit": FAIL_CREDIT,
    }
    bal = alice.balance()
    assert bal["balance"] == pytest.approx(PASS_CREDIT + FAIL_CREDIT)
    assert (bal["accepted"], bal["rejected"]) == (2, 0)


def test_one_byte_changed_after_signing_is_rejected_and_not_recorded(alice: Signer) -> None:
    lease = lease_for(alice)
    signed = honest_pass(alice, lease)
    answer = gold_answer(lease.tasks[0])
    batch = json.dumps({"traces": [signed.model_dump(mode="json")]})
    digit = answer[-1]
    changed = batch.replace(f"<answer>{answer}<", f"<answer>{answer[:-1]}{(int(digit) + 1) % 10}<")
    assert len(changed) == len(batch) and sum(a != b for a, b in zip(batch, changed, strict=True)) == 1
    resp = alice.post("/v1/traces", body=changed.encode())
    (receipt,) = resp.json()["receipts"]
    assert receipt["status"] == "rejected" and receipt["reason"].startswith("bad_trace_signature")
    assert receipt["credit"] == 0.0
    # nothing is written for a trace nobody can be held to, and the honest one still goes through
    assert alice.balance()["entries"] == []
    (ok,) = alice.upload(signed)
    assert ok["status"] == "accepted"


def test_replayed_trace_is_a_duplicate_without_a_second_credit(alice: Signer) -> None:
    lease = lease_for(alice)
    signed = honest_pass(alice, lease)
    (first,) = alice.upload(signed)
    (again,) = alice.upload(signed)  # a new request (new nonce) carrying the same trace
    same_batch = alice.upload(signed, signed)
    assert first["status"] == "accepted"
    assert again["status"] == "duplicate" and again["credit"] == 0.0 and "accepted" in again["reason"]
    assert [r["status"] for r in same_batch] == ["duplicate", "duplicate"]
    bal = alice.balance()
    assert bal["balance"] == pytest.approx(PASS_CREDIT)
    assert len(bal["entries"]) == 1


def test_a_second_trace_for_a_credited_sample_is_rejected(alice: Signer) -> None:
    lease = lease_for(alice)
    task = lease.tasks[0]
    (first,) = alice.upload(honest_pass(alice, lease, 2))
    other = make_trace(
        alice.identity, lease, task, completion_with(gold_answer(task), "Another way."), sample_index=2
    )
    (second,) = alice.upload(other)
    assert first["status"] == "accepted"
    assert second["status"] == "rejected" and second["reason"].startswith("sample_already_credited")
    bal = alice.balance()
    assert bal["balance"] == pytest.approx(PASS_CREDIT)
    assert (bal["accepted"], bal["rejected"]) == (1, 1)


def test_a_trace_for_another_contributors_lease_is_rejected(alice: Signer, bob: Signer) -> None:
    alices = lease_for(alice)
    task = alices.tasks[0]
    forged = make_trace(bob.identity, alices, task, completion_with(gold_answer(task)))
    (receipt,) = bob.upload(forged)
    assert receipt["status"] == "rejected" and receipt["reason"].startswith("lease_not_yours")
    bobs = bob.balance()
    assert bobs["balance"] == 0.0 and bobs["rejected"] == 1
    assert bobs["entries"][0]["reason"].startswith("lease_not_yours")
    assert alice.balance()["entries"] == []


def test_uploading_someone_elses_trace_credits_nobody(alice: Signer, bob: Signer) -> None:
    lease = lease_for(alice)
    alices_trace = honest_pass(alice, lease)
    (receipt,) = bob.upload(alices_trace)
    assert receipt["status"] == "rejected" and receipt["reason"].startswith("contributor_mismatch")
    assert bob.balance()["entries"] == [] and alice.balance()["entries"] == []
    (own,) = alice.upload(alices_trace)  # bob's attempt did not squat on the trace id
    assert own["status"] == "accepted"


def test_forged_verdict_is_rejected(alice: Signer) -> None:
    lease = lease_for(alice)
    task = lease.tasks[0]
    claims_pass = Verdict(score=1.0, passed=True, reason="correct", verifier="reasoning-gym-strict")
    forged = make_trace(
        alice.identity, lease, task, completion_with(wrong_answer(gold_answer(task))), verdict=claims_pass
    )
    half = Verdict(score=0.5, passed=False)  # right answer, wrong score
    shaded = make_trace(
        alice.identity, lease, task, completion_with(gold_answer(task)), sample_index=1, verdict=half
    )
    r_forged, r_shaded = alice.upload(forged, shaded)
    for r in (r_forged, r_shaded):
        assert r["status"] == "rejected" and r["reason"].startswith("verdict_mismatch") and r["credit"] == 0.0
    bal = alice.balance()
    assert bal["balance"] == 0.0 and bal["rejected"] == 2
    assert {e["trace_id"] for e in bal["entries"]} == {forged.trace.trace_id, shaded.trace.trace_id}
    assert all(e["amount"] == 0.0 and e["reason"].startswith("verdict_mismatch") for e in bal["entries"])


def test_traces_that_do_not_match_their_lease_are_rejected(alice: Signer) -> None:
    lease = lease_for(alice, count=1)
    task = lease.tasks[0]
    done = completion_with(gold_answer(task))
    other_task = lease_for(alice, count=1).tasks[0]
    cases = {
        "seed_mismatch": make_trace(alice.identity, lease, task, done, seed=lease.seed ^ 1),
        "model_mismatch": make_trace(alice.identity, lease, task, done, model_sha256="ef" * 32),
        "bad_sample_index": make_trace(alice.identity, lease, task, done, sample_index=CONFIG.group_size),
        "task_not_in_lease": make_trace(alice.identity, lease, other_task, done),
        "unknown_lease": make_trace(alice.identity, lease, task, done, lease_id="no-such-lease"),
        "unsupported_schema_version": make_trace(alice.identity, lease, task, done, schema_version=99),
        "malformed_trace": make_trace(alice.identity, lease, task, done, logprobs=[-0.5]),
    }
    assert other_task.task_id != task.task_id
    traces = cases
    receipts = alice.upload(*traces.values())
    for (code, signed), receipt in zip(traces.items(), receipts, strict=True):
        assert receipt["trace_id"] == signed.trace.trace_id
        assert receipt["status"] == "rejected" and receipt["reason"].startswith(code + ":"), receipt
    assert alice.balance()["rejected"] == len(traces)


def test_late_upload_against_an_expired_lease_is_rejected(tmp_path: Path, model: Path) -> None:
    expired = NodeConfig(families=("chain_sum",), lease_seconds=1e-6, lease_grace_seconds=0.0)
    with running_node(tmp_path / "node.sqlite", model, expired) as base:
        s = Signer(base)
        lease = lease_for(s, count=1)
        (receipt,) = s.upload(honest_pass(s, lease))
        s.close()
    assert receipt["status"] == "rejected" and receipt["reason"].startswith("lease_expired")


def test_balance_reports_exactly_the_credited_traces(alice: Signer, bob: Signer) -> None:
    lease = lease_for(alice, count=2)
    uploads = [honest_pass(alice, lease, i, task_no=i % 2) for i in range(4)]
    t0 = lease.tasks[0]
    uploads.append(
        make_trace(
            alice.identity,
            lease,
            t0,
            completion_with(wrong_answer(gold_answer(t0))),
            sample_index=3,
            verdict=Verdict(score=1.0, passed=True),
        )
    )
    receipts = alice.upload(*uploads) + alice.upload(uploads[0])
    bob.upload(honest_pass(bob, lease_for(bob, 1)))  # someone else's credit is not alice's
    credited = {r["trace_id"]: r["credit"] for r in receipts if r["status"] == "accepted"}
    rejected = {r["trace_id"] for r in receipts if r["status"] == "rejected"}
    assert len(credited) == 4 and len(rejected) == 1
    bal = alice.balance()
    assert bal["balance"] == pytest.approx(sum(credited.values()))
    assert (bal["accepted"], bal["rejected"]) == (4, 1)
    assert {e["trace_id"]: e["amount"] for e in bal["entries"] if e["status"] == "accepted"} == credited
    assert {e["trace_id"] for e in bal["entries"] if e["status"] == "rejected"} == rejected
    ids = [e["entry_id"] for e in bal["entries"]]
    assert ids == sorted(ids, reverse=True)  # newest first
    limited = alice.balance(limit=2)
    assert limited["entries"] == bal["entries"][:2] and limited["balance"] == bal["balance"]


def test_concurrent_uploads_credit_once(alice: Signer) -> None:
    """Eight uploads at once of one trace, and of eight different traces for one sample: one credit each."""
    from concurrent.futures import ThreadPoolExecutor

    lease = lease_for(alice, count=1)
    task = lease.tasks[0]
    same = honest_pass(alice, lease, 0)
    rivals = [
        make_trace(
            alice.identity, lease, task, completion_with(gold_answer(task), f"Way {i}."), sample_index=1
        )
        for i in range(8)
    ]
    with ThreadPoolExecutor(8) as pool:
        same_receipts = [r for batch in pool.map(lambda _: alice.upload(same), range(8)) for r in batch]
        rival_receipts = [r for batch in pool.map(alice.upload, rivals) for r in batch]
    assert sorted(r["status"] for r in same_receipts) == ["accepted"] + ["duplicate"] * 7
    assert sorted(r["status"] for r in rival_receipts) == ["accepted"] + ["rejected"] * 7
    assert all(r["reason"].startswith("sample_already_credited") for r in rival_receipts if r["credit"] == 0)
    bal = alice.balance()
    assert bal["balance"] == pytest.approx(2 * PASS_CREDIT)
    assert (bal["accepted"], bal["rejected"]) == (2, 7)


def test_a_verifier_failure_is_rejected_with_a_reason(tmp_path: Path, model: Path) -> None:
    """A task the verifier cannot handle (put straight into the database) gets 'verifier_error'."""
    from network.storage import Storage
    from protocol import Task

    db = tmp_path / "node.sqlite"
    with running_node(db, model, CONFIG) as base:
        s = Signer(base)
        real = lease_for(s, count=1)
        odd = Task(task_id="odd:1", env="no_such_env", prompt="2+2?", group_size=4)
        lease = real.model_copy(update={"lease_id": "hand-made", "tasks": [odd]})
        Storage(db).add_lease(lease, task_seed=0)
        trace = make_trace(
            s.identity, lease, odd, "<answer>4</answer>", verdict=Verdict(score=1.0, passed=True)
        )
        (receipt,) = s.upload(trace)
        s.close()
    assert receipt["status"] == "rejected" and receipt["reason"].startswith("verifier_error")


def test_the_ledger_and_nonces_survive_a_restart(tmp_path: Path, model: Path) -> None:
    db = tmp_path / "node.sqlite"
    s = Signer("http://unused")
    body = b"{}"
    headers = s.headers("POST", "/v1/contributors", body)
    with running_node(db, model, CONFIG) as base:
        s.http = httpx.Client(base_url=base, timeout=60.0)
        assert s.http.post("/v1/contributors", content=body, headers=headers).status_code == 200
        (receipt,) = s.upload(honest_pass(s, lease_for(s, 1)))
        s.http.close()
    with running_node(db, model, CONFIG) as base:
        s.http = httpx.Client(base_url=base, timeout=60.0)
        again = s.http.post("/v1/contributors", content=body, headers=headers)
        assert again.status_code == 401 and again.json()["code"] == "replayed_nonce"
        assert s.balance()["balance"] == pytest.approx(receipt["credit"]) == pytest.approx(PASS_CREDIT)
        s.http.close()
