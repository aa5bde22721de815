"""The one bridge from core events to the GUI thread.

The core (client/) reports through plain callbacks from whatever thread it runs on. ``EventBridge``
re-emits each event through one Qt signal; Qt queues it to the GUI thread, where handlers run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

__all__ = ["EventBridge"]


class EventBridge(QObject):
    loop_event = Signal(object)

    def callback(self) -> Callable[[Any], None]:
        """A plain callable for the core: safe to call from any thread."""
        return self.loop_event.emit
