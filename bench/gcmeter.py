"""Time spent in the cyclic garbage collector during a benchmark, per generation."""

from __future__ import annotations

import gc
import time
from typing import Any


class GcMeter:
    """Time spent in the cyclic garbage collector, per generation (gc.callbacks)."""

    def __init__(self) -> None:
        self.runs = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._t = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            gen = info["generation"]
            self.runs[gen] += 1
            self.seconds[gen] += time.perf_counter() - self._t

    def start(self) -> GcMeter:
        gc.callbacks.append(self)
        return self

    def stop(self) -> None:
        gc.callbacks.remove(self)

    def __enter__(self) -> GcMeter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __str__(self) -> str:
        return ", ".join(f"gen{g}: {self.runs[g]} runs {self.seconds[g]:.2f} s" for g in range(3))
