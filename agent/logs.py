"""Logging set-up, chosen in one place: text or JSON lines on stderr.

Modules log with ``logging.getLogger(__name__)`` and put the object
(``k8s_object``: kind/namespace/name) and rule (``rule_id``) into ``extra``;
both formats print them.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

_CONTEXT_FIELDS = ("k8s_object", "rule_id", "cluster", "kind")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                doc[name] = str(value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(doc).decode()


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = " ".join(
            f"{name}={getattr(record, name)}" for name in _CONTEXT_FIELDS if getattr(record, name, None) is not None
        )
        return f"{line} [{context}]" if context else line


def configure_logging(level: str = "WARNING", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    try:
        root.setLevel(level.upper())
    except ValueError:
        root.setLevel(logging.WARNING)
