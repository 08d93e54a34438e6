"""Figures of the differential run, printed at the end of the test run (conftest)."""

from __future__ import annotations

from typing import Any

DIFFERENTIAL: dict[str, Any] = {}
