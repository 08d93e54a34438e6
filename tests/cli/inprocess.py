"""Run ``unstick`` in-process, as a user would from a shell but without a
subprocess: an exception escaping ``agent.cli.main`` fails the calling test,
as a traceback would fail a user."""

from __future__ import annotations

import io
import sys

from agent.cli import main


def run(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``unstick ARGS``."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        code = main(list(args))
    finally:
        sys.stdout, sys.stderr = saved
    out.flush()
    return code, out.buffer.getvalue().decode(), err.getvalue()  # type: ignore[attr-defined]
