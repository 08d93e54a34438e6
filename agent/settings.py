"""One settings object, built once at start-up from flags and the environment.

Precedence: a command-line flag, then its environment variable, then the
default. Every problem is collected and reported at once
(:class:`SettingsError`), and secrets never appear in a ``repr`` or a log
line: API tokens are held in :class:`Secret` values and the database URL's
password is masked.

=========================  ============================  =========================================
flag                       environment                   meaning
=========================  ============================  =========================================
``--db URL``               ``UNSTICK_DB_URL``            database (default: ``./unstick.db``)
``--no-migrate``           ``UNSTICK_DB_AUTO_MIGRATE``   upgrade the schema at start-up (``true``)
\\-                         ``UNSTICK_DB_POOL_SIZE``      PostgreSQL connections per process (``20``)
\\-                         ``UNSTICK_DB_POOL_TIMEOUT``   wait for a free connection, then 503 (``20s``)
\\-                         ``UNSTICK_DB_STATEMENT_TIMEOUT`` PostgreSQL ``statement_timeout`` (``60s``; ``0``: the database's)
\\-                         ``UNSTICK_DB_LOCK_TIMEOUT``   PostgreSQL ``lock_timeout`` (``10s``; ``0``: the database's)
``--listen HOST:PORT``     ``UNSTICK_LISTEN``            HTTP address (``127.0.0.1:8080``)
``--api-token-file PATH``  ``UNSTICK_API_TOKEN_FILE``    bearer tokens, one per line
\\-                         ``UNSTICK_API_TOKENS``        bearer tokens, comma-separated
``--no-auth``              \\-                            serve without authentication (local use)
``--no-pages``             ``UNSTICK_PAGES=false``       only ``/healthz`` and ``/metrics`` (a sidecar)
``--trusted-proxies``      ``UNSTICK_TRUSTED_PROXIES``   believe forwarded headers from these networks only
=========================  ============================  =========================================
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from agent.cli import UserError
from analyzers import bounds

if TYPE_CHECKING:
    from agent.leader import LeaseConfig
    from agent.pipeline import PipelineConfig
    from agent.scheduler_config import SchedulerConfigFile

from storage.engine import DEFAULT_DB_URL, DatabaseURLError, EngineOptions, parse_db_url, redact_db_url

MIN_TOKEN_LENGTH = 16
MAX_GRACE = 30 * 86400.0
"""Longest ``--grace`` / ``--scale-up-timeout``: 30 days."""
MAX_INTERVAL = timedelta(days=365)
"""Longest ``--renotify-interval`` / ``--storm-window``."""
MAX_TIMEOUT = 3600.0
"""Longest timeout, lease or heartbeat a user may set: an hour."""
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


class SettingsError(UserError):
    """Invalid configuration; ``errors`` lists every problem found."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        if len(self.errors) == 1:
            super().__init__(self.errors[0])
        else:
            super().__init__("invalid configuration:\n  - " + "\n  - ".join(self.errors))


class Secret:
    """A value that prints as ``'**********'``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class DbSettings:
    url: str = DEFAULT_DB_URL
    """SQLAlchemy URL: ``sqlite+aiosqlite:///PATH`` (embedded) or ``postgresql+asyncpg://…`` (a fleet)."""
    auto_migrate: bool = True
    """Upgrade the schema to the newest revision at start-up (PostgreSQL: under an advisory lock)."""
    engine: EngineOptions = field(default_factory=EngineOptions)
    """PostgreSQL's pool and timeouts (``UNSTICK_DB_POOL_SIZE`` and friends)."""

    @staticmethod
    def engine_from_env(env: Mapping[str, str], errors: list[str]) -> EngineOptions:
        """``UNSTICK_DB_POOL_SIZE`` (1–500), ``UNSTICK_DB_POOL_TIMEOUT`` (0.1 s–1 h),
        ``UNSTICK_DB_STATEMENT_TIMEOUT`` and ``UNSTICK_DB_LOCK_TIMEOUT`` (0–1 h; ``0`` leaves
        the database's own setting); bad values are collected in ``errors``."""
        default = EngineOptions()

        def bounded(name: str, parse: Callable[..., Any], fallback: Any, **limits: Any) -> Any:
            raw = env.get(name)
            if raw is None or raw == "":
                return fallback
            try:
                return parse(name, raw, **limits)
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))
                return fallback

        def timeout(name: str, fallback: float | None) -> float | None:
            value = bounded(name, bounds.seconds, fallback, minimum=0.0, maximum=MAX_TIMEOUT)
            return None if value == 0 else value

        return EngineOptions(
            pool_size=bounded("UNSTICK_DB_POOL_SIZE", bounds.count, default.pool_size, minimum=1, maximum=500),
            pool_timeout=bounded(
                "UNSTICK_DB_POOL_TIMEOUT", bounds.seconds, default.pool_timeout, minimum=0.1, maximum=MAX_TIMEOUT
            ),
            statement_timeout=timeout("UNSTICK_DB_STATEMENT_TIMEOUT", default.statement_timeout),
            lock_timeout=timeout("UNSTICK_DB_LOCK_TIMEOUT", default.lock_timeout),
        )

    def __repr__(self) -> str:
        return (
            f"DbSettings(url={redact_db_url(self.url)!r}, auto_migrate={self.auto_migrate}, engine={self.engine})"
        )


@dataclass(frozen=True, slots=True)
class ApiSettings:
    host: str = DEFAULT_HOST
    """Listen address; ``0.0.0.0`` in a container."""
    port: int = DEFAULT_PORT
    tokens: tuple[Secret, ...] = field(default=(), repr=False)
    """Bearer tokens accepted by the API and the pages."""
    auth: bool = True
    """False only with ``--no-auth``: everything is open (a laptop, never a cluster)."""
    default_page_size: int = 50
    max_page_size: int = 200
    """Largest ``limit`` a list request may ask for; larger is a 400, not a silent cut."""
    max_request_bytes: int = 64 * 1024
    """Largest request body (the API is read-only; only the login form has a body)."""
    pages: bool = True
    """False with ``--no-pages``: only ``/healthz`` and ``/metrics`` (a sidecar), no API, no pages."""
    header_timeout: float = 15.0
    """Seconds a connection may take to send a complete request head (idle keep-alive too)."""
    body_timeout: float = 10.0
    """Seconds a request body may take to arrive."""
    auth_failures_per_minute: float = 10.0
    """Failed authentications a client may make (a burst of as many, refilled per minute) before
    every request from it is answered 429 for a while (a correct guess included)."""
    trust_forwarded_headers: bool = False
    """Believe ``X-Forwarded-Proto``/``-For`` from the one proxy in front (Secure cookie, client address;
    the rightmost ``X-Forwarded-For`` hop is the client)."""
    trusted_proxies: tuple[str, ...] = ()
    """``--trusted-proxies CIDR…``: believe forwarded headers only from these networks, and take the
    rightmost hop outside them as the client (``agent.api.auth.ProxyTrust``)."""
    public_url: str = ""
    """Where people open the pages (``UNSTICK_PUBLIC_URL``); ``https://`` makes the cookie Secure."""

    def __repr__(self) -> str:
        return (
            f"ApiSettings(host={self.host!r}, port={self.port}, tokens=<{len(self.tokens)} token(s)>, "
            f"auth={self.auth}, max_page_size={self.max_page_size})"
        )


@dataclass(frozen=True, slots=True)
class Settings:
    db: DbSettings = field(default_factory=DbSettings)
    api: ApiSettings = field(default_factory=ApiSettings)

    @classmethod
    def from_args(
        cls, args: argparse.Namespace | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Build from parsed flags (the ``add_*_arguments`` ones) and ``environ`` (default: ``os.environ``)."""
        env = os.environ if environ is None else environ
        flags: dict[str, Any] = vars(args) if args is not None else {}
        errors: list[str] = []

        url = flags.get("db") or env.get("UNSTICK_DB_URL") or DEFAULT_DB_URL
        try:
            parse_db_url(url)
        except DatabaseURLError as exc:
            errors.append(f"--db / UNSTICK_DB_URL: database URL {redact_db_url(url)!r}: {exc}")
        auto_migrate = _bool(env, "UNSTICK_DB_AUTO_MIGRATE", True, errors)
        engine = DbSettings.engine_from_env(env, errors)
        if flags.get("no_migrate"):
            auto_migrate = False

        host, port = DEFAULT_HOST, DEFAULT_PORT
        listen = flags.get("listen") or env.get("UNSTICK_LISTEN")
        if listen:
            try:
                host, port = parse_listen(listen)
            except ValueError as exc:
                errors.append(str(exc))

        tokens: list[Secret] = []
        token_file = flags.get("api_token_file") or env.get("UNSTICK_API_TOKEN_FILE")
        if token_file:
            try:
                tokens += _read_tokens(token_file)
            except OSError as exc:
                errors.append(f"API token file {token_file!r}: {exc.strerror or exc}")
            else:
                if not tokens:
                    errors.append(f"API token file {token_file!r} holds no token")
        tokens += [Secret(t.strip()) for t in env.get("UNSTICK_API_TOKENS", "").split(",") if t.strip()]
        short = [i for i, t in enumerate(tokens, 1) if len(t.reveal()) < MIN_TOKEN_LENGTH]
        if short:
            errors.append(
                f"API token(s) number {', '.join(map(str, short))} shorter than {MIN_TOKEN_LENGTH} characters"
            )
        auth = not flags.get("no_auth", False)
        pages = not flags.get("no_pages") and _bool(env, "UNSTICK_PAGES", True, errors)
        trust_forwarded = bool(flags.get("trust_forwarded_headers")) or _bool(
            env, "UNSTICK_TRUST_FORWARDED_HEADERS", False, errors
        )
        public_url = env.get("UNSTICK_PUBLIC_URL", "").strip()
        proxies: list[str] = []
        for item in flags.get("trusted_proxies") or env.get("UNSTICK_TRUSTED_PROXIES", "").split(","):
            for cidr in (c.strip() for c in str(item).split(",")):
                if not cidr:
                    continue
                try:
                    proxies.append(str(ipaddress.ip_network(cidr, strict=False)))
                except ValueError:
                    errors.append(
                        f"--trusted-proxies / UNSTICK_TRUSTED_PROXIES: {cidr[:60]!r} is not an address or CIDR network"
                    )
        if flags.get("require_tokens") and auth and pages and not tokens:
            errors.append(
                "no API tokens: give --api-token-file PATH or UNSTICK_API_TOKEN_FILE (one token per line), "
                "or --no-auth to serve without authentication"
            )

        if errors:
            raise SettingsError(errors)
        return cls(
            db=DbSettings(url=url, auto_migrate=auto_migrate, engine=engine),
            api=ApiSettings(
                host=host,
                port=port,
                tokens=tuple(dict.fromkeys(tokens)),
                auth=auth,
                pages=pages,
                trust_forwarded_headers=trust_forwarded or bool(proxies),
                trusted_proxies=tuple(dict.fromkeys(proxies)),
                public_url=public_url,
            ),
        )


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (all interfaces) or ``[v6]:PORT``; port 0 picks a free port."""
    host, sep, port_s = value.rpartition(":")
    if not sep or not re.fullmatch(r"[0-9]{1,5}", port_s) or not 0 <= int(port_s) < 65536:
        raise ValueError(f"listen address {value!r}: expected HOST:PORT with a port 0-65535")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_s)


def _option(flag: str, env_name: str) -> str:
    """How an error names an option: ``--grace / UNSTICK_GRACE_SECONDS`` (either may be empty)."""
    return " / ".join(x for x in (f"--{flag.replace('_', '-')}" if flag else "", env_name) if x)


def _bool(env: Mapping[str, str], name: str, default: bool, errors: list[str]) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    errors.append(f"{name}={raw!r} is not a valid bool (true/false/1/0)")
    return default


def _read_tokens(path: str) -> list[Secret]:
    """One token per line; blank lines and ``#`` comments are ignored (a mounted Secret may end in a newline)."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return [Secret(s) for s in (line.strip() for line in lines) if s and not s.startswith("#")]


def add_db_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="URL",
        help=f"database URL (env UNSTICK_DB_URL; default {DEFAULT_DB_URL})",
    )


def add_api_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="HTTP listen address (env UNSTICK_LISTEN; default 127.0.0.1:8080)",
    )
    parser.add_argument(
        "--api-token-file",
        metavar="PATH",
        help="file of bearer tokens, one per line (env UNSTICK_API_TOKEN_FILE; UNSTICK_API_TOKENS takes a comma list)",
    )
    parser.add_argument(
        "--no-auth", action="store_true", help="serve without authentication (local use only)"
    )
    parser.add_argument(
        "--no-migrate", action="store_true", help="do not upgrade the database schema at start-up"
    )
    parser.add_argument(
        "--trust-forwarded-headers",
        action="store_true",
        help="behind one TLS-terminating proxy: believe its X-Forwarded-Proto/-For, the rightmost hop being "
        "the client (env UNSTICK_TRUST_FORWARDED_HEADERS)",
    )
    parser.add_argument(
        "--trusted-proxies",
        nargs="+",
        metavar="CIDR",
        help="believe X-Forwarded-Proto/-For only from these networks; the client is the rightmost "
        "X-Forwarded-For hop outside them (env UNSTICK_TRUSTED_PROXIES, comma list)",
    )
    parser.add_argument(
        "--no-pages",
        action="store_true",
        help="serve only /healthz and /metrics: no API, no pages (a sidecar; env UNSTICK_PAGES=false)",
    )


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What the live agent (``watch``, ``demo``) needs beyond the database and API.

    =========================  ============================  =========================================
    flag                       environment                   meaning
    =========================  ============================  =========================================
    ``--cluster NAME``         ``UNSTICK_CLUSTER``           name of the cluster in incidents
    ``--namespace NS``         ``UNSTICK_NAMESPACES``        watch only these namespaces (repeatable / comma list)
    ``--grace SECONDS``        ``UNSTICK_GRACE_SECONDS``     pending time before a pod becomes an incident (60)
    ``--scale-up-timeout S``   ``UNSTICK_SCALE_UP_TIMEOUT``  how long to wait for an autoscaler (600)
    ``--kube-version X.Y``     ``UNSTICK_KUBE_VERSION``      message wording (default: the API server's)
    ``--renotify-interval D``  ``UNSTICK_RENOTIFY_INTERVAL`` remind about incidents still open (24h)
    ``--storm-threshold N``    ``UNSTICK_STORM_THRESHOLD``   more new incidents than N in the window: a digest (10)
    ``--storm-window D``       ``UNSTICK_STORM_WINDOW``      the storm window, per cluster (5m)
    ``--scheduler-config F``   ``UNSTICK_SCHEDULER_CONFIG``  the cluster's KubeSchedulerConfiguration file
    =========================  ============================  =========================================
    """

    cluster: str = ""
    namespaces: tuple[str, ...] = ()
    grace: float = 60.0
    scale_up_timeout: float = 600.0
    kube_version: str | None = None
    renotify_interval: timedelta = timedelta(hours=24)
    storm_threshold: int = 10
    storm_window: timedelta = timedelta(minutes=5)
    # The cluster's KubeSchedulerConfiguration (None: the default), validated for its release
    # once the API server says which (ClusterAgent.connect).
    scheduler_config: SchedulerConfigFile | None = None

    @classmethod
    def from_args(
        cls, args: argparse.Namespace | None = None, environ: Mapping[str, str] | None = None
    ) -> AgentSettings:
        env = os.environ if environ is None else environ
        flags: dict[str, Any] = vars(args) if args is not None else {}
        errors: list[str] = []

        def seconds(flag: str, name: str, default: float, maximum: float) -> float:
            raw = flags.get(flag)
            raw = raw if raw is not None else env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return bounds.seconds(_option(flag, name), raw, minimum=0.0, maximum=maximum)
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))
                return default

        grace = seconds("grace", "UNSTICK_GRACE_SECONDS", 60.0, MAX_GRACE)
        scale_up = seconds("scale_up_timeout", "UNSTICK_SCALE_UP_TIMEOUT", 600.0, MAX_GRACE)
        namespaces: list[str] = []
        for item in flags.get("namespace") or env.get("UNSTICK_NAMESPACES", "").split(","):
            namespaces += [n.strip() for n in str(item).split(",") if n.strip()]
        version = flags.get("kube_version") or env.get("UNSTICK_KUBE_VERSION") or None
        if version is not None:
            from agent.kube_version import check_kube_version

            try:
                version = check_kube_version(version)
            except ValueError as exc:
                errors.append(str(exc))

        def duration(flag: str, name: str, default: timedelta, minimum: timedelta) -> timedelta:
            raw = flags.get(flag) or env.get(name)
            if not raw:
                return default
            try:
                return bounds.duration(_option(flag, name), raw, minimum=minimum, maximum=MAX_INTERVAL)
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))
                return default

        renotify = duration(
            "renotify_interval", "UNSTICK_RENOTIFY_INTERVAL", timedelta(hours=24), timedelta(minutes=1)
        )
        window = duration("storm_window", "UNSTICK_STORM_WINDOW", timedelta(minutes=5), timedelta(seconds=1))
        raw_storm = flags.get("storm_threshold") or env.get("UNSTICK_STORM_THRESHOLD")
        storm = 10
        if raw_storm:
            try:
                storm = bounds.count(
                    _option("storm_threshold", "UNSTICK_STORM_THRESHOLD"), raw_storm, minimum=1, maximum=100_000
                )
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))
        scheduler_config = None
        config_file = flags.get("scheduler_config") or env.get("UNSTICK_SCHEDULER_CONFIG")
        if config_file:
            from agent.scheduler_config import SchedulerConfigError, read_scheduler_config

            try:
                scheduler_config = read_scheduler_config(str(config_file))
                scheduler_config.check()
                if version is not None:
                    scheduler_config.profiles(version)
            except SchedulerConfigError as exc:
                errors.append(f"--scheduler-config / UNSTICK_SCHEDULER_CONFIG: {exc}")
        if errors:
            raise SettingsError(errors)
        return cls(
            cluster=flags.get("cluster") or env.get("UNSTICK_CLUSTER", ""),
            scheduler_config=scheduler_config,
            namespaces=tuple(dict.fromkeys(namespaces)),
            grace=grace,
            scale_up_timeout=scale_up,
            kube_version=version,
            renotify_interval=renotify,
            storm_threshold=storm,
            storm_window=window,
        )

    def pipeline_config(self) -> PipelineConfig:
        """The pipeline's configuration, but for the scheduler profiles: those depend on the
        cluster's release, and ``ClusterAgent.connect(scheduler_config=…)`` reads them."""
        from agent.pipeline import PipelineConfig
        from storage.tracker import NotifyPolicy

        return PipelineConfig(
            cluster=self.cluster or "default",
            grace=self.grace,
            scale_up_timeout=self.scale_up_timeout,
            kube_version=self.kube_version,
            notify_policy=NotifyPolicy(
                storm_threshold=self.storm_threshold,
                storm_window=self.storm_window,
                reminder_interval=self.renotify_interval,
            ),
        )


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster", metavar="NAME", help="name of this cluster in incidents (env UNSTICK_CLUSTER)"
    )
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        metavar="NS",
        help="watch only these namespaces (repeatable; env UNSTICK_NAMESPACES)",
    )
    parser.add_argument(
        "--grace",
        type=str,
        metavar="SECONDS",
        help="pending time before a pod becomes an incident (env UNSTICK_GRACE_SECONDS; 60)",
    )
    parser.add_argument(
        "--scale-up-timeout",
        type=str,
        metavar="SECONDS",
        help="wait this long for cluster-autoscaler/Karpenter (600)",
    )
    parser.add_argument(
        "--kube-version", metavar="X.Y", help="kube-scheduler wording to expect (default: the API server's)"
    )
    parser.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="the cluster's KubeSchedulerConfiguration (profiles, disabled filters; env UNSTICK_SCHEDULER_CONFIG)",
    )
    parser.add_argument(
        "--renotify-interval",
        metavar="DURATION",
        help="remind about incidents still open after this long (30m, 24h, 7d; env UNSTICK_RENOTIFY_INTERVAL; 24h)",
    )
    parser.add_argument(
        "--storm-threshold",
        metavar="N",
        help="more new incidents than N in the storm window: one digest instead (env UNSTICK_STORM_THRESHOLD; 10)",
    )
    parser.add_argument(
        "--storm-window",
        metavar="DURATION",
        help="the storm window, per cluster (env UNSTICK_STORM_WINDOW; 5m)",
    )


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """Scale-out over Kafka: ``watch --publish`` and ``unstick worker``.

    ===============================  ==================================  ==========================================
    flag                             environment                         meaning
    ===============================  ==================================  ==========================================
    ``--publish/--broker URL``       ``UNSTICK_KAFKA_BROKERS``           ``kafka://HOST:PORT[,HOST:PORT…]``
    ``--topic-prefix P``             ``UNSTICK_TOPIC_PREFIX``            topic names ``P-deltas``, ``P-dead-letters`` (unstick)
    ``--partitions N``               ``UNSTICK_STREAM_PARTITIONS``       partitions of the delta topic (12)
    ``--buffer N``                   ``UNSTICK_PUBLISH_BUFFER``          records a publisher holds while the broker is away (100000)
    ``--grace SECONDS``              ``UNSTICK_GRACE_SECONDS``           as for ``watch`` (60)
    ``--debounce SECONDS``           ``UNSTICK_DEBOUNCE_SECONDS``        wait after a change before a pass (0.5)
    ``--sink NAME``                  ``UNSTICK_SINKS``                   outbox sinks to write notifications for
    ``--web HOST:PORT``              ``UNSTICK_WORKER_WEB``              worker's /healthz, /readyz, /metrics (``$POD_IP:6066``)
    ``--datadir PATH``               ``UNSTICK_WORKER_DATADIR``          faust's data folder (a temporary one)
    \\-                               ``UNSTICK_KAFKA_SESSION_TIMEOUT``   consumer-group session timeout, seconds (45)
    \\-                               ``UNSTICK_KAFKA_REBALANCE_TIMEOUT`` rebalance timeout, seconds (60)
    \\-                               ``UNSTICK_KAFKA_HEARTBEAT``         heartbeat interval, seconds (3)
    \\-                               ``UNSTICK_KAFKA_MAX_BATCH_BYTES``   producer batch size (16384)
    \\-                               ``UNSTICK_WORKER_STALL_SECONDS``    /healthz fails after this long stalled (300)
    ===============================  ==================================  ==========================================
    """

    brokers: tuple[str, ...] = ()
    topic_prefix: str = "unstick"
    partitions: int = 12
    buffer: int = 100_000
    grace: float = 60.0
    debounce: float = 0.5
    sinks: tuple[str, ...] = ()
    web_host: str = "0.0.0.0"
    web_port: int = 6066
    datadir: str | None = None
    session_timeout: float = 45.0
    rebalance_timeout: float = 60.0
    heartbeat_interval: float = 3.0
    producer_max_batch_size: int = 16384
    stall_timeout: float = 300.0

    @property
    def bootstrap(self) -> str:
        """``host:port,host:port`` for aiokafka."""
        return ",".join(self.brokers)

    @property
    def faust_broker(self) -> str:
        return ";".join(f"kafka://{b}" for b in self.brokers)

    @property
    def deltas_topic(self) -> str:
        return f"{self.topic_prefix}-deltas"

    @property
    def dead_letter_topic(self) -> str:
        return f"{self.topic_prefix}-dead-letters"

    @classmethod
    def from_args(
        cls, args: argparse.Namespace | None = None, environ: Mapping[str, str] | None = None
    ) -> StreamSettings:
        env = os.environ if environ is None else environ
        flags: dict[str, Any] = vars(args) if args is not None else {}
        errors: list[str] = []

        def value(flag: str, name: str) -> Any:
            raw = flags.get(flag)
            return raw if raw is not None else env.get(name)

        def bounded(parse: Callable[..., Any], flag: str, name: str, default: Any, **limits: Any) -> Any:
            """The flag (else the environment variable) through ``parse``; a bad value is
            collected as one error naming both, and the default stands in."""
            raw = value(flag, name)
            if raw is None or raw == "":
                return default
            try:
                return parse(_option(flag, name), raw, **limits)
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))
                return default

        def count(flag: str, name: str, default: int, maximum: int) -> int:
            return int(bounded(bounds.count, flag, name, default, minimum=1, maximum=maximum))

        def secs(flag: str, name: str, default: float, *, minimum: float, maximum: float) -> float:
            return float(bounded(bounds.seconds, flag, name, default, minimum=minimum, maximum=maximum))

        def size(flag: str, name: str, default: int, maximum: int) -> int:
            return int(bounded(bounds.size, flag, name, default, minimum=1, maximum=maximum))

        brokers: list[str] = []
        url = flags.get("publish") or flags.get("broker") or env.get("UNSTICK_KAFKA_BROKERS")
        if url:
            try:
                brokers = parse_kafka_url(url)
            except ValueError as exc:
                errors.append(str(exc))
        prefix = value("topic_prefix", "UNSTICK_TOPIC_PREFIX") or "unstick"
        if not _TOPIC.fullmatch(prefix):
            errors.append(
                f"--topic-prefix: {prefix!r} is not a valid Kafka topic name (letters, digits, . _ -)"
            )
        web_host, web_port = env.get("POD_IP") or "0.0.0.0", 6066
        web = value("web", "UNSTICK_WORKER_WEB")
        if web:
            try:
                web_host, web_port = parse_listen(web)
            except ValueError as exc:
                errors.append(f"--web: {exc}")
            if web_port == 0:
                errors.append(f"--web: {web!r}: the worker needs a fixed port (1-65535)")
        sinks: list[str] = []
        for item in flags.get("sink") or env.get("UNSTICK_SINKS", "").split(","):
            sinks += [s.strip() for s in str(item).split(",") if s.strip()]
        settings = cls(
            brokers=tuple(brokers),
            topic_prefix=prefix,
            partitions=count("partitions", "UNSTICK_STREAM_PARTITIONS", 12, 10_000),
            buffer=count("buffer", "UNSTICK_PUBLISH_BUFFER", 100_000, 10_000_000),
            grace=secs("grace", "UNSTICK_GRACE_SECONDS", 60.0, minimum=0.0, maximum=MAX_GRACE),
            debounce=secs("debounce", "UNSTICK_DEBOUNCE_SECONDS", 0.5, minimum=0.0, maximum=MAX_TIMEOUT),
            sinks=tuple(dict.fromkeys(sinks)),
            web_host=web_host,
            web_port=web_port,
            datadir=value("datadir", "UNSTICK_WORKER_DATADIR") or None,
            session_timeout=secs(
                "", "UNSTICK_KAFKA_SESSION_TIMEOUT", 45.0, minimum=0.001, maximum=MAX_TIMEOUT
            ),
            rebalance_timeout=secs(
                "", "UNSTICK_KAFKA_REBALANCE_TIMEOUT", 60.0, minimum=0.001, maximum=MAX_TIMEOUT
            ),
            heartbeat_interval=secs("", "UNSTICK_KAFKA_HEARTBEAT", 3.0, minimum=0.001, maximum=MAX_TIMEOUT),
            producer_max_batch_size=size("", "UNSTICK_KAFKA_MAX_BATCH_BYTES", 16384, 64 * 1024**2),
            stall_timeout=secs("", "UNSTICK_WORKER_STALL_SECONDS", 300.0, minimum=1.0, maximum=MAX_TIMEOUT),
        )
        if errors:
            raise SettingsError(errors)
        return settings


_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,200}")


def parse_kafka_url(url: str) -> list[str]:
    """``kafka://HOST:PORT[,HOST:PORT…]`` (the scheme is optional) → ``["HOST:PORT", …]``."""
    rest = url[len("kafka://") :] if url.startswith("kafka://") else url
    if "://" in rest:
        raise ValueError(f"broker URL {url!r}: expected kafka://HOST:PORT[,HOST:PORT…]")
    brokers = []
    for part in (p.strip() for p in rest.replace(";", ",").split(",")):
        part = part[len("kafka://") :] if part.startswith("kafka://") else part
        host, sep, port = part.rpartition(":")
        if not part or not sep or not host or not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536:
            raise ValueError(f"broker URL {url!r}: {part!r} is not HOST:PORT")
        brokers.append(part)
    return brokers


def add_stream_arguments(parser: argparse.ArgumentParser, *, url_flag: str) -> None:
    """``url_flag``: ``--publish`` (watch) or ``--broker`` (worker)."""
    parser.add_argument(
        url_flag,
        metavar="kafka://HOST:PORT[,…]",
        help="Kafka bootstrap brokers (env UNSTICK_KAFKA_BROKERS)",
    )
    parser.add_argument(
        "--topic-prefix",
        metavar="PREFIX",
        help="prefix of the topic names (env UNSTICK_TOPIC_PREFIX; unstick)",
    )
    parser.add_argument(
        "--partitions",
        metavar="N",
        help="partitions of the delta topic when created (env UNSTICK_STREAM_PARTITIONS; 12)",
    )


_SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass(frozen=True, slots=True)
class LeaderSettings:
    """Leader election on a Lease (``watch`` with several replicas), kube-scheduler's flag names.

    =====================================  =================================  ==========================================
    flag                                   environment                        meaning
    =====================================  =================================  ==========================================
    ``--leader-elect``                     ``UNSTICK_LEADER_ELECT``           only the Lease holder watches, analyses, sends
    ``--leader-elect-lease-duration D``    ``UNSTICK_LEASE_DURATION``         a follower takes over after this (15s)
    ``--leader-elect-renew-deadline D``    ``UNSTICK_RENEW_DEADLINE``         the leader stops when it cannot renew (10s)
    ``--leader-elect-retry-period D``      ``UNSTICK_RETRY_PERIOD``           between attempts (2s)
    ``--leader-elect-resource-name N``     ``UNSTICK_LEASE_NAME``             the Lease's name (``unstick-leader``)
    ``--leader-elect-resource-namespace``  ``POD_NAMESPACE``                  its namespace (default: the pod's own)
    \\-                                     ``POD_NAME``                       this replica's identity (default: host name)
    =====================================  =================================  ==========================================
    """

    enabled: bool = False
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    name: str = "unstick-leader"
    namespace: str = "default"
    identity: str = ""

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace | None = None,
        environ: Mapping[str, str] | None = None,
        *,
        hostname: str | None = None,
        sa_namespace_file: str = _SA_NAMESPACE_FILE,
    ) -> LeaderSettings:
        env = os.environ if environ is None else environ
        flags: dict[str, Any] = vars(args) if args is not None else {}
        errors: list[str] = []
        enabled = bool(flags.get("leader_elect")) or _bool(env, "UNSTICK_LEADER_ELECT", False, errors)

        def duration(flag: str, name: str, default: float) -> float:
            raw = flags.get(flag)
            raw = raw if raw is not None else env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return bounds.seconds(_option(flag, name), raw, minimum=0.001, maximum=MAX_TIMEOUT)
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))
                return default

        lease = duration("leader_elect_lease_duration", "UNSTICK_LEASE_DURATION", 15.0)
        renew = duration("leader_elect_renew_deadline", "UNSTICK_RENEW_DEADLINE", 10.0)
        retry = duration("leader_elect_retry_period", "UNSTICK_RETRY_PERIOD", 2.0)
        namespace = flags.get("leader_elect_resource_namespace") or env.get("POD_NAMESPACE") or ""
        if not namespace:
            try:
                with open(sa_namespace_file, encoding="utf-8") as fh:
                    namespace = fh.read().strip()
            except OSError:
                namespace = "default"
        if hostname is None:
            import socket

            hostname = socket.gethostname()
        settings = cls(
            enabled=enabled,
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
            name=flags.get("leader_elect_resource_name") or env.get("UNSTICK_LEASE_NAME") or "unstick-leader",
            namespace=namespace,
            identity=env.get("POD_NAME") or hostname,
        )
        if enabled and not errors:
            errors += settings.lease_config().problems()
        if errors:
            raise SettingsError(errors)
        return settings

    def lease_config(self) -> LeaseConfig:
        from agent.leader import LeaseConfig

        return LeaseConfig(
            namespace=self.namespace,
            identity=self.identity,
            name=self.name,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


def add_leader_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("leader election (several replicas)")
    group.add_argument(
        "--leader-elect",
        action="store_true",
        help="only the holder of a coordination.k8s.io Lease watches, analyses and notifies; "
        "every replica serves the API and pages (env UNSTICK_LEADER_ELECT)",
    )
    group.add_argument("--leader-elect-lease-duration", metavar="DURATION", help="lease duration (15s)")
    group.add_argument("--leader-elect-renew-deadline", metavar="DURATION", help="renew deadline (10s)")
    group.add_argument("--leader-elect-retry-period", metavar="DURATION", help="retry period (2s)")
    group.add_argument("--leader-elect-resource-name", metavar="NAME", help="the Lease's name (unstick-leader)")
    group.add_argument(
        "--leader-elect-resource-namespace",
        metavar="NS",
        help="the Lease's namespace (env POD_NAMESPACE; default: the pod's own, else default)",
    )
