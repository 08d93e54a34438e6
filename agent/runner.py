"""The composition root of the live agent: one ``ClusterAgent`` per watched
cluster (gateway → watcher → cache → pipeline), one database, one web app,
one notifier (the outbox worker and its sinks).

``unstick watch`` runs one ClusterAgent against a real cluster; ``unstick
demo`` runs several against in-process fake API endpoints. Everything is built
here and passed down; nothing below reads settings or the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import re
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.agent_metrics import AgentCollector, analysis_histogram
from agent.api.app import app_runner, create_app
from agent.cache import ClusterCache
from agent.dryrun import DryRunVerifier
from agent.kube.gateway import Gateway
from agent.kube.watcher import MetricsPoller, MetricsSample, MetricsUnavailable, Watcher
from agent.leader import LeaderElector
from agent.notify.metrics import NotifyCollector
from agent.notify.settings import NotifySettings
from agent.notify.worker import OutboxWorker
from agent.pipeline import PassOutcome, Pipeline, PipelineConfig
from agent.scales import ScaleReader
from agent.scheduler_config import SchedulerConfigError, SchedulerConfigFile
from agent.settings import ApiSettings
from analyzers.findings import Finding
from analyzers.remedies import RemedyRenderer
from analyzers.snapshot import ClusterState
from storage.engine import EngineOptions, create_sessionmaker

log = logging.getLogger(__name__)

OnPass = Callable[[str, PassOutcome], Awaitable[None] | None]


def minor_version(version: dict[str, object]) -> str | None:
    """'1.30' from the API server's /version (gitVersion 'v1.30.4+rke2r1', or major/minor)."""
    git = str(version.get("gitVersion") or "")
    match = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", git)
    if match:
        return ".".join(g for g in match.groups() if g is not None)
    major, minor = str(version.get("major") or ""), str(version.get("minor") or "").rstrip("+")
    return f"{major}.{minor}" if major.isdigit() and minor.isdigit() else None


@dataclass
class ClusterAgent:
    """Everything that watches and analyses one cluster."""

    cluster: str
    gateway: Gateway
    cache: ClusterCache
    watcher: Watcher
    pipeline: Pipeline
    metrics: MetricsPoller | None = None
    last_tracked: tuple[Finding, ...] = ()
    # Watch and metrics tasks are cancelled on stop; the pipeline task is let drain.
    watch_tasks: list[asyncio.Task[None]] = field(default_factory=list)
    pipeline_task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(
        cls,
        *,
        cluster: str,
        gateway: Gateway,
        sessions: async_sessionmaker[AsyncSession],
        config: PipelineConfig,
        renderer: RemedyRenderer,
        namespaces: Sequence[str] | None = None,
        on_pass: OnPass | None = None,
        observe_seconds: Callable[[float], None] | None = None,
        metrics_interval: float = 30.0,
        notifier: OutboxWorker | None = None,
        verify_with_dry_run: bool = False,
        scheduler_config: SchedulerConfigFile | None = None,
    ) -> ClusterAgent:
        """Connect to the cluster and build its watcher, cache and pipeline. With a ``notifier``,
        passes write outbox rows for its sinks and wake it. ``scheduler_config``: the cluster's
        KubeSchedulerConfiguration, validated for the API server's release (a
        :class:`~agent.scheduler_config.SchedulerConfigError` when that release refuses it)."""
        await gateway.open()
        kube_version = config.kube_version
        if kube_version is None:
            try:
                kube_version = minor_version(await gateway.version())
            except Exception as exc:  # an old or odd server: analyse with the default wording
                log.warning("could not read the API server version (%s); assuming a recent release", exc)
        sinks = notifier.sink_names if notifier is not None else config.sinks
        profiles = config.scheduler_profiles
        if scheduler_config is not None:
            try:
                profiles = scheduler_config.profiles(kube_version)
            except SchedulerConfigError:
                await gateway.close()
                raise
        config = PipelineConfig(
            **{
                **config.__dict__,
                "kube_version": kube_version,
                "cluster": cluster,
                "sinks": sinks,
                "scheduler_profiles": profiles,
            }
        )
        cache = ClusterCache(ClusterState(kube_version))
        agent: ClusterAgent

        async def _on_pass(outcome: PassOutcome) -> None:
            agent.last_tracked = outcome.tracked
            if notifier is not None and outcome.result.notifications:
                notifier.wake()
            if on_pass is not None:
                maybe = on_pass(cluster, outcome)
                if maybe is not None:
                    await maybe

        check_remedies = DryRunVerifier(gateway).check if verify_with_dry_run else None
        scales = ScaleReader(gateway)
        pipeline = Pipeline(
            cache,
            sessions,
            config,
            renderer=renderer,
            on_pass=_on_pass,
            observe_seconds=observe_seconds,
            check_remedies=check_remedies,
            before_pass=lambda: scales.refresh(cache.state),
        )
        cache.on_event = pipeline.on_event
        watcher = Watcher(gateway, cache, namespaces=namespaces)
        metrics = None
        if await gateway.metrics_available():
            metrics = MetricsPoller(
                gateway, cls._metrics_callback(cache), interval=metrics_interval, namespaces=namespaces
            )
        else:
            log.warning(
                "cluster %s has no metrics.k8s.io API: load-skew analysis needs metrics-server", cluster
            )
        agent = cls(cluster, gateway, cache, watcher, pipeline, metrics)
        return agent

    @staticmethod
    def _metrics_callback(
        cache: ClusterCache,
    ) -> Callable[[MetricsSample | MetricsUnavailable], Awaitable[None]]:
        async def apply(result: MetricsSample | MetricsUnavailable) -> None:
            if isinstance(result, MetricsSample):
                cache.apply_metrics(result)

        return apply

    def start_watching(self) -> None:
        """Watch (and poll metrics) without the pipeline loop: callers run passes themselves."""
        self.watch_tasks.append(asyncio.create_task(self.watcher.run(), name=f"watch:{self.cluster}"))
        if self.metrics is not None:
            self.watch_tasks.append(asyncio.create_task(self.metrics.run(), name=f"metrics:{self.cluster}"))

    def start(self, stop: asyncio.Event) -> None:
        self.start_watching()
        self.pipeline_task = asyncio.create_task(self._analyse(stop), name=f"pipeline:{self.cluster}")

    async def _analyse(self, stop: asyncio.Event) -> None:
        # Never analyse a half-listed cluster: a pass over partial state would
        # resolve every open incident whose objects were not listed yet.
        await self.watcher.wait_synced()
        if self.watcher.unavailable_kinds:
            log.warning(
                "cluster %s: not watching %s (no such API or no access)",
                self.cluster,
                ", ".join(self.watcher.unavailable_kinds),
            )
        gc.freeze()  # the initial objects live for long; keep the collector off them
        await self.pipeline.run(stop)

    async def halt(self) -> None:
        """Stop everything at once, the pipeline mid-pass included (its open transaction rolls
        back): what a leader does the moment it loses the Lease."""
        tasks = [*self.watch_tasks, *([self.pipeline_task] if self.pipeline_task is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.gateway.close()

    async def stop(self) -> None:
        """Stop watching, let the pipeline drain (it runs a final pass), close the connection."""
        for task in self.watch_tasks:
            task.cancel()
        for task in self.watch_tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.pipeline_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.pipeline_task, timeout=30)
        await self.gateway.close()


@dataclass
class AgentHost:
    """The database, the web app and the ClusterAgents sharing them."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    registry: CollectorRegistry
    histogram: Histogram
    renderer: RemedyRenderer
    agents: list[ClusterAgent] = field(default_factory=list)
    runner: web.AppRunner | None = None
    url: str = ""
    # Leader election (``watch --leader-elect``): None means this process always leads.
    elector: LeaderElector | None = None
    # Called with True when this replica starts leading and False the moment it stops
    # (on a lost Lease, before anything else): what sends must start and stop with it.
    leadership_hooks: list[Callable[[bool], Awaitable[None] | None]] = field(default_factory=list)
    notifier: OutboxWorker | None = None

    @classmethod
    async def open(
        cls, db_url: str, *, migrate: bool = True, options: EngineOptions | None = None
    ) -> AgentHost:
        from agent.database import migrate as migrate_schema
        from agent.database import open_engine

        engine = await open_engine(db_url, options=options)
        if migrate:
            try:
                await migrate_schema(engine, db_url)
            except BaseException:
                await engine.dispose()
                raise
        registry = CollectorRegistry(auto_describe=True)
        host = cls(
            engine, create_sessionmaker(engine), registry, analysis_histogram(registry), RemedyRenderer()
        )
        registry.register(AgentCollector(lambda: host.agents))
        registry.register(NotifyCollector(lambda: host.notifier))
        return host

    async def start_notifier(
        self, settings: NotifySettings, *, console: TextIO | None = None
    ) -> OutboxWorker | None:
        """Build the configured sinks and start draining the outbox into them (None: no sink).
        Links in messages point at ``--public-url``, else at the pages this host serves."""
        worker = await settings.start_worker(
            self.sessions, base_url=self.url, console=console, fence=self.is_leader
        )
        if worker is None:
            return None
        self.notifier = worker
        log.info("notifications go to: %s", ", ".join(worker.sink_names))
        return worker

    def observe(self, seconds: float) -> None:
        self.histogram.observe(seconds)

    def synced(self) -> bool:
        if self.elector is not None and not self.elector.is_leader():
            return True  # a follower serves the API and pages; it watches nothing
        return bool(self.agents) and all(a.watcher.synced for a in self.agents)

    def ready(self) -> bool:
        """``/readyz``: every kind listed once, and the API server answering every watcher now
        (false while it is down, throttling or failing with 5xx; true again once each watcher
        has listed or opened a watch). A follower watches nothing and is ready."""
        if self.elector is not None and not self.elector.is_leader():
            return True
        return self.synced() and not any(a.watcher.failing for a in self.agents)

    def is_leader(self) -> bool:
        """The fence: whatever sends notifications asks this right before each send."""
        return self.elector is None or self.elector.is_leader()

    def role(self) -> dict[str, str | None]:
        """``/readyz``'s role: standalone (no election), leader or follower, and who leads."""
        if self.elector is None:
            return {"role": "standalone"}
        return {
            "role": self.elector.role,
            "identity": self.elector.config.identity,
            "leader": self.elector.config.identity if self.elector.is_leader() else self.elector.holder,
        }

    async def leadership_changed(self, leading: bool) -> None:
        for hook in self.leadership_hooks:
            with contextlib.suppress(Exception):
                maybe = hook(leading)
                if maybe is not None:
                    await maybe

    async def serve(
        self, api: ApiSettings, configure: Callable[[web.Application], None] | None = None
    ) -> str:
        """Serve the API and pages; ``configure`` may add routes before the app is frozen (the demo's)."""
        if self.runner is None:  # built once; a retry on another port reuses it
            app = create_app(
                sessions=self.sessions,
                settings=api,
                readiness=self.ready,
                registry=self.registry,
                role=self.role,
            )
            if configure is not None:
                configure(app)
            self.runner = app_runner(app, api)
            await self.runner.setup()
        site = web.TCPSite(self.runner, api.host, api.port)
        await site.start()
        sockets = [s.getsockname() for s in (site._server.sockets if site._server else [])]  # type: ignore[union-attr]
        port = sockets[0][1] if sockets else api.port
        host = api.host if api.host not in ("", "0.0.0.0") else "127.0.0.1"
        self.url = f"http://{host}:{port}"
        return self.url

    async def close(self, *, drain_seconds: float = 10.0) -> None:
        """Stop the agents (their final passes may write notifications), give the notifier
        ``drain_seconds`` to send what is due, stop it, stop serving, close the database."""
        for agent in self.agents:
            await agent.stop()
        if self.notifier is not None:
            left = await self.notifier.drain(drain_seconds)
            if left:
                log.warning(
                    "%d notification(s) not sent yet; they stay in the outbox for the next start", left
                )
            await self.notifier.stop()
        if self.runner is not None:
            await self.runner.cleanup()
        await self.engine.dispose()


def install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
