"""``unstick watch``: the live agent against a cluster (kubeconfig or in-cluster).

Watches the cluster, keeps a slim cache, analyses as events stream, tracks
incidents in the database and serves the API, pages, health and metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING

from agent.cli import UserError
from agent.notify.settings import NotifySettings, add_notify_arguments
from agent.settings import (
    AgentSettings,
    LeaderSettings,
    Settings,
    StreamSettings,
    add_agent_arguments,
    add_api_arguments,
    add_db_arguments,
    add_leader_arguments,
    add_stream_arguments,
)

if TYPE_CHECKING:
    from agent.kube.gateway import Gateway
    from agent.runner import AgentHost, ClusterAgent

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "watch",
        help="watch a cluster live: explain stuck pods, rollouts and drains as they happen",
        description=(
            "Watch a Kubernetes cluster (kubeconfig or in-cluster service account), explain scheduling failures, "
            "stalled rollouts and blocked drains as they happen, keep incidents in the database and serve the API "
            "and pages alongside."
        ),
    )
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (env KUBECONFIG; default ~/.kube/config, else in-cluster)",
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    p.add_argument(
        "--verify-with-dry-run",
        action="store_true",
        help=(
            "check each verified remedy with a server-side dry run (its PATCH or CREATE with ?dryRun=All) and "
            "record the outcome in its verification; needs RBAC verbs patch and create on the kinds (see README)"
        ),
    )
    add_agent_arguments(p)
    add_db_arguments(p)
    add_api_arguments(p)
    add_notify_arguments(p)
    add_stream_arguments(p, url_flag="--publish")
    p.add_argument(
        "--buffer", metavar="N", help="with --publish: records held while the broker is away (100000)"
    )
    add_leader_arguments(p)
    p.set_defaults(func=run, require_tokens=True)


def run(args: argparse.Namespace) -> int:
    from agent.settings import SettingsError

    if getattr(args, "publish", None):
        args.require_tokens = False  # publishing serves only /healthz, /readyz and /metrics
        settings = Settings.from_args(args)
        agent = AgentSettings.from_args(args)
        return asyncio.run(publish(settings, agent, StreamSettings.from_args(args), args))

    problems: list[str] = []
    built: list[object] = []
    for build in (Settings.from_args, AgentSettings.from_args, NotifySettings.from_args, LeaderSettings.from_args):
        try:
            built.append(build(args))
        except SettingsError as exc:  # every problem of every group at once
            problems += exc.errors
    if problems:
        raise SettingsError(problems)
    settings, agent, notify, leader = built
    assert isinstance(settings, Settings) and isinstance(agent, AgentSettings)
    assert isinstance(notify, NotifySettings) and isinstance(leader, LeaderSettings)
    if leader.enabled:
        return asyncio.run(
            watch_elected(
                settings,
                agent,
                leader,
                kubeconfig=args.kubeconfig,
                context=args.context,
                notify=notify,
                verify_with_dry_run=args.verify_with_dry_run,
            )
        )
    return asyncio.run(
        watch(
            settings,
            agent,
            kubeconfig=args.kubeconfig,
            context=args.context,
            notify=notify,
            verify_with_dry_run=args.verify_with_dry_run,
        )
    )


async def watch(
    settings: Settings,
    agent: AgentSettings,
    *,
    kubeconfig: str | None,
    context: str | None,
    notify: NotifySettings | None = None,
    verify_with_dry_run: bool = False,
) -> int:
    from agent.kube.errors import KubeError
    from agent.kube.gateway import Gateway
    from agent.runner import AgentHost, install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    host = await AgentHost.open(settings.db.url, migrate=settings.db.auto_migrate, options=settings.db.engine)
    try:
        gateway = Gateway(kubeconfig, context)
        try:
            cluster_agent = await _connect(
                host, agent, gateway, context=context, notify=notify, verify_with_dry_run=verify_with_dry_run
            )
        except KubeError as exc:
            print(f"unstick: error: cannot reach the cluster: {exc}", file=sys.stderr)
            return 2
        url = await _serve(host, settings)
        if url is None:
            return 2
        print(
            f"unstick: watching {cluster_agent.cluster} ({gateway.server or 'in-cluster'}); API and pages on {url}",
            file=sys.stderr,
        )
        cluster_agent.start(stop)
        await stop.wait()
        print("unstick: stopping: draining the pipeline", file=sys.stderr)
        return 0
    finally:
        await host.close()


async def watch_elected(
    settings: Settings,
    agent: AgentSettings,
    leader: LeaderSettings,
    *,
    kubeconfig: str | None,
    context: str | None,
    notify: NotifySettings | None = None,
    verify_with_dry_run: bool = False,
) -> int:
    """Several replicas: every one serves the API and pages; only the Lease holder watches,
    analyses and notifies. Losing the Lease halts the pipeline at once (mid-pass included);
    a clean shutdown lets the last pass finish, then releases the Lease."""
    from agent.kube.errors import KubeError
    from agent.kube.gateway import Gateway
    from agent.leader import LeaderElector, lead
    from agent.runner import AgentHost, install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    host = await AgentHost.open(settings.db.url, migrate=settings.db.auto_migrate, options=settings.db.engine)
    # The Lease has a connection of its own: renewals never queue behind watches.
    elector = LeaderElector(Gateway(kubeconfig, context), leader.lease_config())
    host.elector = elector
    try:
        try:
            await elector.gateway.open()
        except KubeError as exc:
            print(f"unstick: error: cannot reach the cluster: {exc}", file=sys.stderr)
            return 2
        url = await _serve(host, settings)
        if url is None:
            return 2
        cfg = elector.config
        print(
            f"unstick: {cfg.identity} campaigns for Lease {cfg.namespace}/{cfg.name} "
            f"({elector.gateway.server or 'in-cluster'}); API and pages on {url}",
            file=sys.stderr,
        )

        async def started() -> None:
            # Only the leader sends: the outbox worker runs while this replica leads.
            cluster_agent = await _connect(
                host,
                agent,
                Gateway(kubeconfig, context),
                context=context,
                notify=notify,
                verify_with_dry_run=verify_with_dry_run,
            )
            cluster_agent.start(stop)
            print(f"unstick: {cfg.identity} leads: watching {cluster_agent.cluster}", file=sys.stderr)
            await host.leadership_changed(True)

        async def stopped(lost: bool) -> None:
            await host.leadership_changed(False)  # senders stop first
            agents, host.agents = list(host.agents), []
            for cluster_agent in agents:
                await (cluster_agent.halt() if lost else cluster_agent.stop())
            notifier, host.notifier = host.notifier, None
            if notifier is not None:
                if not lost:  # a clean stop: send what the last pass wrote, still the leader
                    await notifier.drain(10.0)
                # Lost: in-flight sends are cancelled now and handed back (same idempotency key).
                await notifier.stop(grace=0.0 if lost else 20.0)
            if lost:
                print(f"unstick: {cfg.identity} lost the Lease: stopped watching", file=sys.stderr)

        await lead(elector, on_started=started, on_stopped=stopped, stop=stop)
        print("unstick: stopping", file=sys.stderr)
        return 0
    finally:
        await host.close()
        await elector.gateway.close()


async def publish(settings: Settings, agent: AgentSettings, stream: StreamSettings, args: argparse.Namespace) -> int:
    """``watch --publish``: the same gateway and watcher, deltas to Kafka (agent.stream.publisher)."""
    from agent.kube.gateway import Gateway
    from agent.runner import install_signal_handlers
    from agent.stream.publisher import publish_cluster

    stop = asyncio.Event()
    install_signal_handlers(stop)
    try:
        await publish_cluster(
            cluster=agent.cluster or args.context or "default",
            gateway=Gateway(args.kubeconfig, args.context),
            stream=stream,
            listen=(settings.api.host, settings.api.port),
            namespaces=agent.namespaces or None,
            stop=stop,
            kube_version=agent.kube_version,
        )
    except OSError as exc:
        print(f"unstick: error: cannot listen on {settings.api.host}:{settings.api.port}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


async def _serve(host: AgentHost, settings: Settings) -> str | None:
    """The API and pages on ``--listen``: their URL, or None after a one-line error."""
    try:
        return await host.serve(settings.api)
    except OSError as exc:
        print(
            f"unstick: error: cannot listen on {settings.api.host}:{settings.api.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return None


async def _connect(
    host: AgentHost,
    agent: AgentSettings,
    gateway: Gateway,
    *,
    context: str | None,
    notify: NotifySettings | None,
    verify_with_dry_run: bool,
) -> ClusterAgent:
    """Start the notifier (if configured) and connect the cluster's agent to ``gateway``."""
    from agent.runner import ClusterAgent
    from agent.scheduler_config import SchedulerConfigError

    notifier = await host.start_notifier(notify) if notify is not None else None
    try:
        cluster_agent = await ClusterAgent.connect(
            cluster=agent.cluster or context or "default",
            gateway=gateway,
            sessions=host.sessions,
            config=agent.pipeline_config(),
            renderer=host.renderer,
            namespaces=agent.namespaces or None,
            observe_seconds=host.observe,
            notifier=notifier,
            verify_with_dry_run=verify_with_dry_run,
            scheduler_config=agent.scheduler_config,
        )
    except SchedulerConfigError as exc:
        raise UserError(f"--scheduler-config / UNSTICK_SCHEDULER_CONFIG: {exc}") from None
    host.agents.append(cluster_agent)
    return cluster_agent
