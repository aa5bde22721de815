"""The window, offscreen: it draws what the core reports, and a whole run works from it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from client.contribute import LoopEvent, RunSummary
from ui.bridge import EventBridge
from ui.main_window import MainWindow
from ui.worker import ContributionWorker


def test_window_shows_progress_counters_and_errors(qtbot) -> None:  # type: ignore[no-untyped-def]
    window = MainWindow(target_tasks=4)
    qtbot.addWidget(window)
    window.handle_event(LoopEvent("ready", "ready", {"address": "tm1abc", "keystore": "encrypted file",
                                                     "model": "SmolLM2", "network": "http://127.0.0.1:1"}))
    summary = RunSummary(tasks=2, traces=8, passed=2, completion_tokens=500, decode_s=5.0,
                         accepted=8, credits=1.2)
    window.handle_event(LoopEvent("task_done", "task done", {"summary": summary}))
    assert window.counters["tasks"].text() == "2"
    assert window.counters["pass_rate"].text() == "25%"
    assert window.counters["speed"].text() == "100.0"
    assert window.counters["credits"].text() == "1.20"
    assert (window.progress.value(), window.progress.maximum()) == (2, 4)
    assert window.address_label.text() == "tm1abc"
    window.handle_event(LoopEvent("error", "cannot reach the network node at http://x"))
    assert "cannot reach the network node" in window.status_label.text()
    assert window.activity.count() == 3


def test_pause_button_signals_the_worker(qtbot) -> None:  # type: ignore[no-untyped-def]
    window = MainWindow()
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.pause_requested, timeout=1000):
        window.pause_button.click()
    assert window.pause_button.text() == "Resume"
    with qtbot.waitSignal(window.resume_requested, timeout=1000):
        window.pause_button.click()
    assert window.pause_button.text() == "Pause"


@pytest.mark.model
def test_a_whole_run_from_the_window(qtbot, tracemill_home: Path, node_url: str) -> None:  # type: ignore[no-untyped-def]
    window = MainWindow(target_tasks=1)
    qtbot.addWidget(window)
    bridge = EventBridge()
    bridge.loop_event.connect(window.handle_event)
    worker = ContributionWorker(argparse.Namespace(network=node_url, tasks=1), bridge.callback())
    worker.start()
    try:
        qtbot.waitUntil(lambda: window.finished, timeout=300_000)
    finally:
        worker.stop()
    assert window.counters["tasks"].text() == "1"
    assert window.counters["traces"].text() == "4"
    assert window.balance_label.text().endswith("credits")
    assert window.address_label.text().startswith("tm1")
    assert "Stopped" not in window.status_label.text()
