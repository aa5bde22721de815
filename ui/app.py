"""Start the desktop app: the window, the tray icon, and the contribution worker behind them."""

from __future__ import annotations

import argparse
import sys

from PySide6.QtGui import QAction, QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon

from ui.bridge import EventBridge
from ui.main_window import MainWindow
from ui.worker import ContributionWorker

__all__ = ["run_gui", "app_icon"]


def app_icon() -> QIcon:
    """A simple drawn icon (a filled circle), so the tray has something before assets land."""
    pix = QPixmap(64, 64)
    pix.fill(QColor(0, 0, 0, 0))
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(QColor("#2e7d32"))
    painter.setPen(QColor("#1b5e20"))
    painter.drawEllipse(4, 4, 56, 56)
    painter.end()
    return QIcon(pix)


def _tray(app: QApplication, window: MainWindow) -> QSystemTrayIcon | None:
    if not QSystemTrayIcon.isSystemTrayAvailable():
        return None
    tray = QSystemTrayIcon(app_icon(), app)
    tray.setToolTip("Tracemill")
    menu = QMenu()
    show = QAction("Show Tracemill", menu)
    show.triggered.connect(window.showNormal)
    pause = QAction("Pause / Resume", menu)
    pause.triggered.connect(window._toggle_pause)
    quit_action = QAction("Quit", menu)
    quit_action.triggered.connect(app.quit)
    for action in (show, pause, quit_action):
        menu.addAction(action)
    tray.setContextMenu(menu)
    tray.show()
    return tray


def run_gui(args: argparse.Namespace) -> int:
    """Show the window and contribute until the user quits (or ``--tasks`` are done)."""
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("Tracemill")
    app.setWindowIcon(app_icon())
    window = MainWindow(target_tasks=getattr(args, "tasks", None))
    bridge = EventBridge()
    bridge.loop_event.connect(window.handle_event)
    worker = ContributionWorker(args, bridge.callback())
    window.pause_requested.connect(worker.pause)
    window.resume_requested.connect(worker.resume)
    tray = _tray(app, window)  # noqa: F841 (kept alive for the app's lifetime)
    window.show()
    worker.start()
    code = app.exec()
    worker.stop()
    return int(code)
