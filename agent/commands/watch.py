"""``unstick watch``: the live agent against a cluster (kubeconfig or in-cluster).

Watches the cluster, keeps a slim cache, analyses as events stream, tracks
incidents in the database and serves the API, pages, health and metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from agent.settings import (
    AgentSettings,
    LeaderSettings,
    Settings,
    add_agent_arguments,
    add_api_arguments,
    add_db_arguments,
    add_leader_arguments,
)

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
    add_agent_arguments(p)
    add_db_arguments(p)
    add_api_arguments(p)
    add_leader_arguments(p)
    p.set_defaults(func=run, require_tokens=True)


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    agent = AgentSettings.from_args(args)
    leader = LeaderSettings.from_args(args)
    if leader.enabled:
        return asyncio.run(watch_elected(settings, agent, leader, kubeconfig=args.kubeconfig, context=args.context))
    return asyncio.run(watch(settings, agent, kubeconfig=args.kubeconfig, context=args.context))


async def watch(
    settings: Settings, agent: AgentSettings, *, kubeconfig: str | None, context: str | None
) -> int:
    from agent.kube.errors import KubeError
    from agent.kube.gateway import Gateway
    from agent.runner import AgentHost, ClusterAgent, install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    host = await AgentHost.open(settings.db.url, migrate=settings.db.auto_migrate)
    try:
        gateway = Gateway(kubeconfig, context)
        try:
            cluster_agent = await ClusterAgent.connect(
                cluster=agent.cluster or context or "default",
                gateway=gateway,
                sessions=host.sessions,
                config=agent.pipeline_config(),
                renderer=host.renderer,
                namespaces=agent.namespaces or None,
                observe_seconds=host.observe,
            )
        except KubeError as exc:
            print(f"unstick: error: cannot reach the cluster: {exc}", file=sys.stderr)
            return 2
        host.agents.append(cluster_agent)
        try:
            url = await host.serve(settings.api)
        except OSError as exc:
            print(
                f"unstick: error: cannot listen on {settings.api.host}:{settings.api.port}: {exc.strerror}",
                file=sys.stderr,
            )
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
) -> int:
    """Several replicas: every one serves the API and pages; only the Lease holder watches,
    analyses and notifies. Losing the Lease halts the pipeline at once (mid-pass included);
    a clean shutdown lets the last pass finish, then releases the Lease."""
    from agent.kube.errors import KubeError
    from agent.kube.gateway import Gateway
    from agent.leader import LeaderElector, lead
    from agent.runner import AgentHost, ClusterAgent, install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    host = await AgentHost.open(settings.db.url, migrate=settings.db.auto_migrate)
    # The Lease has a connection of its own: renewals never queue behind watches.
    elector = LeaderElector(Gateway(kubeconfig, context), leader.lease_config())
    host.elector = elector
    try:
        try:
            await elector.gateway.open()
        except KubeError as exc:
            print(f"unstick: error: cannot reach the cluster: {exc}", file=sys.stderr)
            return 2
        try:
            url = await host.serve(settings.api)
        except OSError as exc:
            print(
                f"unstick: error: cannot listen on {settings.api.host}:{settings.api.port}: {exc.strerror}",
                file=sys.stderr,
            )
            return 2
        cfg = elector.config
        print(
            f"unstick: {cfg.identity} campaigns for Lease {cfg.namespace}/{cfg.name} "
            f"({elector.gateway.server or 'in-cluster'}); API and pages on {url}",
            file=sys.stderr,
        )

        async def started() -> None:
            cluster_agent = await ClusterAgent.connect(
                cluster=agent.cluster or context or "default",
                gateway=Gateway(kubeconfig, context),
                sessions=host.sessions,
                config=agent.pipeline_config(),
                renderer=host.renderer,
                namespaces=agent.namespaces or None,
                observe_seconds=host.observe,
            )
            host.agents.append(cluster_agent)
            cluster_agent.start(stop)
            print(f"unstick: {cfg.identity} leads: watching {cluster_agent.cluster}", file=sys.stderr)
            await host.leadership_changed(True)

        async def stopped(lost: bool) -> None:
            await host.leadership_changed(False)  # senders stop first
            agents, host.agents = list(host.agents), []
            for cluster_agent in agents:
                await (cluster_agent.halt() if lost else cluster_agent.stop())
            if lost:
                print(f"unstick: {cfg.identity} lost the Lease: stopped watching", file=sys.stderr)

        await lead(elector, on_started=started, on_stopped=stopped, stop=stop)
        print("unstick: stopping", file=sys.stderr)
        return 0
    finally:
        await host.close()
        await elector.gateway.close()
