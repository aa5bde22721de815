"""The main window: a Contribute tab (status, progress, counters, pause/resume, activity log) and a
Wallet tab (address, where the key is kept, balance). It only draws: the work runs in the
ContributionWorker and arrives here as events through the EventBridge."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QLabel,
    QListWidget,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from client.contribute import LoopEvent, RunSummary

__all__ = ["MainWindow"]

MAX_LOG_LINES = 500


class MainWindow(QMainWindow):
    pause_requested = Signal()
    resume_requested = Signal()

    def __init__(self, target_tasks: int | None = None) -> None:
        super().__init__()
        self.setWindowTitle("Tracemill")
        self.resize(760, 520)
        self.target_tasks = target_tasks
        self.paused = False
        self.finished = False
        tabs = QTabWidget()
        tabs.addTab(self._contribute_tab(), "Contribute")
        tabs.addTab(self._wallet_tab(), "Wallet")
        self.setCentralWidget(tabs)
        self.statusBar().showMessage("Starting…")

    # -- layout ---------------------------------------------------------------------------------

    def _contribute_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        self.status_label = QLabel("Starting…")
        self.status_label.setWordWrap(True)
        self.status_label.setStyleSheet("font-size: 15px; font-weight: 600;")
        layout.addWidget(self.status_label)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy until we know how much there is
        self.progress.setFormat("%v / %m tasks")
        layout.addWidget(self.progress)

        stats = QGroupBox("This session")
        grid = QGridLayout(stats)
        self.counters: dict[str, QLabel] = {}
        columns = [("tasks", "Tasks"), ("traces", "Traces"), ("pass_rate", "Pass rate"),
                   ("speed", "Tokens/s"), ("accepted", "Accepted"), ("credits", "Credits earned")]
        for i, (key, title) in enumerate(columns):
            title_label = QLabel(title)
            title_label.setStyleSheet("color: palette(mid);")
            value = QLabel("–")
            value.setStyleSheet("font-size: 20px;")
            value.setAlignment(Qt.AlignmentFlag.AlignLeft)
            grid.addWidget(title_label, 0, i)
            grid.addWidget(value, 1, i)
            self.counters[key] = value
        layout.addWidget(stats)

        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self._toggle_pause)
        layout.addWidget(self.pause_button, alignment=Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(QLabel("Activity"))
        self.activity = QListWidget()
        layout.addWidget(self.activity, stretch=1)
        return page

    def _wallet_tab(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.address_label = QLabel("–")
        self.address_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.keystore_label = QLabel("–")
        self.balance_label = QLabel("–")
        self.balance_label.setStyleSheet("font-size: 22px; font-weight: 600;")
        self.ledger_label = QLabel("–")
        form.addRow("Address", self.address_label)
        form.addRow("Key kept in", self.keystore_label)
        form.addRow("Balance", self.balance_label)
        form.addRow("Traces", self.ledger_label)
        return page

    # -- events from the worker (GUI thread) ----------------------------------------------------

    def handle_event(self, event: LoopEvent) -> None:
        kind = event.kind
        if kind not in ("download",):
            self._log(event.message)
        if kind == "ready":
            self.address_label.setText(event.data["address"])
            self.keystore_label.setText(event.data["keystore"])
            self._status(f"Contributing to {event.data['network']} with {event.data['model']}")
            if self.target_tasks:
                self.progress.setRange(0, self.target_tasks)
                self.progress.setValue(0)
        elif kind == "download":
            total = int(event.data.get("total") or 0)
            self.progress.setFormat("downloading model: %p%")
            self.progress.setRange(0, max(total, 1))
            self.progress.setValue(int(event.data.get("done") or 0))
        elif kind == "task_started":
            self._status(f"Working on {event.data['task_id']} ({event.data['k']} samples)")
        elif kind in ("task_done", "uploaded", "stopped"):
            summary = event.data.get("summary")
            if isinstance(summary, RunSummary):
                self._show_summary(summary)
        elif kind == "balance":
            b = event.data["balance"]
            self.balance_label.setText(f"{b.balance:.2f} credits")
            self.ledger_label.setText(f"{b.accepted} accepted, {b.rejected} rejected")
        elif kind == "paused":
            self._status("Paused — nothing is running. Press Resume to continue.")
        elif kind == "error":
            self._status(f"Stopped: {event.message}")
            self.status_label.setStyleSheet("font-size: 15px; font-weight: 600; color: #b00020;")
        elif kind == "finished":
            self.finished = True
            self.pause_button.setEnabled(False)
            if self.progress.maximum() == 0:
                self.progress.setRange(0, 1)

    def _show_summary(self, s: RunSummary) -> None:
        c = self.counters
        c["tasks"].setText(str(s.tasks))
        c["traces"].setText(str(s.traces))
        c["pass_rate"].setText(f"{s.pass_rate:.0%}")
        c["speed"].setText(f"{s.tokens_per_s:.1f}")
        c["accepted"].setText(str(s.accepted))
        c["credits"].setText(f"{s.credits:.2f}")
        if self.target_tasks:
            self.progress.setFormat("%v / %m tasks")
            self.progress.setRange(0, self.target_tasks)
            self.progress.setValue(min(s.tasks, self.target_tasks))

    def _status(self, text: str) -> None:
        self.status_label.setText(text)
        self.statusBar().showMessage(text)

    def _log(self, line: str) -> None:
        self.activity.addItem(line)
        while self.activity.count() > MAX_LOG_LINES:
            self.activity.takeItem(0)
        self.activity.scrollToBottom()

    def _toggle_pause(self) -> None:
        self.paused = not self.paused
        self.pause_button.setText("Resume" if self.paused else "Pause")
        if self.paused:
            self._status("Pausing after the current step…")
            self.pause_requested.emit()
        else:
            self._status("Resuming…")
            self.resume_requested.emit()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt's name)
        super().closeEvent(event)
