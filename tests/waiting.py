"""Waiting for something to become true in an async test, one helper for every tier."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def eventually(
    check: Callable[[], Any], timeout: float = 15.0, what: str | None = None, interval: float = 0.1
) -> Any:
    """Await ``check()`` (sync or async) until it returns something truthy, and return that.

    After ``timeout`` seconds: ``TimeoutError``, or — when ``what`` names what was awaited —
    an ``AssertionError`` saying so (the test's failure line then tells what never happened)."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = check()
                if asyncio.iscoroutine(value):
                    value = await value
                if value:
                    return value
                await asyncio.sleep(interval)
    except TimeoutError:
        if what is None:
            raise
        raise AssertionError(f"timed out after {timeout:.0f}s: {what}") from None
