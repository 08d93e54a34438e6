"""``--kube-version``: the kube-scheduler version whose wording to expect."""

from __future__ import annotations

import re

# Kubernetes minor versions unstick accepts (those newer than the newest
# wording change in analyzers.simulator.versions are worded as the newest).
SUPPORTED_VERSIONS = ((1, 18), (1, 38))


def check_kube_version(text: str) -> str:
    """``--kube-version``: MAJOR.MINOR (or MAJOR.MINOR.PATCH) within SUPPORTED_VERSIONS;
    raises ValueError with the message for the user."""
    lo, hi = SUPPORTED_VERSIONS
    m = re.fullmatch(r"v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?", text.strip())
    if m is None:
        raise ValueError(f"--kube-version: expected MAJOR.MINOR such as 1.30, got {text[:40]!r}")
    if not lo <= (int(m.group(1)), int(m.group(2))) <= hi:
        raise ValueError(
            f"--kube-version: {text} is outside the supported range {lo[0]}.{lo[1]}–{hi[0]}.{hi[1]}"
        )
    return text.strip().lstrip("v")
