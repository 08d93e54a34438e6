"""The machine a benchmark ran on, printed beside its figures."""

from __future__ import annotations

import os
import platform
import sys


def describe() -> str:
    """``CPU model, N cores allowed (M online), load a/b/c, RAM, Python x.y.z``."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parts = [model, f"{allowed} cores allowed ({os.cpu_count()} online)"]
    if hasattr(os, "getloadavg"):
        parts.append("load {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg()))
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        parts.append(f"{pages / 2**30:.1f} GiB RAM")
    except (ValueError, OSError, AttributeError):
        pass
    parts.append(f"Python {sys.version.split()[0]} on {platform.system()} {platform.release()}")
    return ", ".join(parts)


if __name__ == "__main__":
    print(describe())
