"""The demo's sink: each message printed in the terminal, as it would go to Slack."""

from __future__ import annotations

import sys
from typing import TextIO

from agent.notify.base import Delivery, Sent
from agent.notify.render import Renderer


class ConsoleSink:
    """Prints :meth:`Renderer.console_text` of every notification to ``stream``."""

    def __init__(self, renderer: Renderer, stream: TextIO | None = None, *, name: str = "console") -> None:
        self.name = name
        self.concurrency = 1  # one message at a time: lines of two messages never interleave
        self._renderer = renderer
        self._stream = stream

    async def deliver(self, delivery: Delivery) -> Sent:
        stream = self._stream or sys.stdout
        stream.write(self._renderer.console_text(delivery.payload, "would post to Slack"))
        stream.flush()
        return Sent()

    async def close(self) -> None:
        return None
