"""``unstick demo``: the live agent with no cluster needed.

Starts one in-process, protocol-faithful Kubernetes API endpoint per seed
incident (``agent/demo/scenarios``), runs the real agent against each of them
through kubernetes-asyncio, keeps incidents in SQLite (a temporary folder
unless ``--db`` is given), serves the API and pages on localhost and prints
incidents as they open and resolve. ``--once`` plays every timeline to the
end, step by step, and prints the incidents (``--json``: a JSON array in the
storage contract's shape).

Interactive (without ``--once``), each scenario's timeline stops before its
fix while its incident is open: the incident page offers "Apply this remedy
to the demo cluster" (this command alone registers that action), which runs
the remedy's command against the in-process cluster
(``agent.fakecluster.remedies``) and lets the rest of the scenario play (the
controllers' and the scheduler's part); the incident then resolves, saying
what changed. ``--auto-fix-after SECONDS`` applies the first verified remedy
by itself, for unattended runs.

Notifications take the same options as ``watch`` (Slack, webhooks); with none
given, ``--notify-console`` is the default and each message is printed as it
would go to Slack. ``--once`` exits only after the outbox has drained.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import logging
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from agent.notify.settings import NotifySettings, add_notify_arguments
from agent.settings import AgentSettings, Settings, add_agent_arguments, add_api_arguments, add_db_arguments

QUIET_SECONDS = 0.25  # no cache change for this long: the agent has seen the step
STEP_TIMEOUT = 10.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="no cluster needed: watch the seed incidents unfold against an in-process Kubernetes API",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--once", action="store_true", help="play every timeline to the end, print the incidents, exit"
    )
    p.add_argument("--json", action="store_true", help="with --once: print the incidents as a JSON array")
    p.add_argument("--speed", default="1", help="timeline speed factor, more than 0 and at most 1000 (default 1: real time)")
    p.add_argument("--scenario", action="append", metavar="NAME", help="only these scenarios (default: all)")
    p.add_argument(
        "--auto-fix-after",
        metavar="SECONDS",
        default=None,
        help="interactive demo: apply an open incident's first verified remedy after this many seconds "
        "(default: wait for the apply action on its page)",
    )
    add_agent_arguments(p)
    add_db_arguments(p)
    add_api_arguments(p)
    add_notify_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.log_level.upper() == "WARNING":
        # The demo prints incidents itself; the agent's own notices would repeat them.
        for name in ("agent.pipeline", "agent.runner"):
            logging.getLogger(name).setLevel(logging.ERROR)
    if args.grace is None:
        args.grace = "0"  # the scenarios' pods have been pending since the past
    from agent.cli import UserError
    from analyzers import bounds

    try:
        args.speed = bounds.number("--speed", args.speed, minimum=0.0, maximum=1000.0, exclusive_minimum=True)
        if args.auto_fix_after is not None:
            args.auto_fix_after = bounds.seconds(
                "--auto-fix-after", args.auto_fix_after, minimum=0.0, maximum=86400.0
            )
    except bounds.OutOfBounds as exc:
        raise UserError(str(exc)) from None
    if args.listen is None:
        args.listen = "127.0.0.1:0" if args.once else "127.0.0.1:8080"
    with tempfile.TemporaryDirectory(prefix="unstick-demo-") as tmp:
        if args.db is None:
            args.db = f"sqlite+aiosqlite:///{tmp}/unstick-demo.db"
        from agent.settings import SettingsError

        problems: list[str] = []
        try:
            settings = Settings.from_args(args)
        except SettingsError as exc:
            problems += exc.errors
        try:
            agent = AgentSettings.from_args(args)
        except SettingsError as exc:
            problems += exc.errors
        try:
            notify = NotifySettings.from_args(args, console_default=True)
        except SettingsError as exc:
            problems += exc.errors
        if problems:
            raise SettingsError(problems)
        if not settings.api.tokens or not settings.api.auth:
            if not _loopback(settings.api.host):
                from agent.cli import UserError

                raise UserError(
                    f"--listen {args.listen}: not a loopback address, and without tokens the demo's pages "
                    "need no sign-in; give --api-token-file PATH to serve beyond this machine"
                )
            # A loopback-only demo opens its pages without sign-in (--api-token-file requires tokens).
            settings = dataclasses.replace(settings, api=dataclasses.replace(settings.api, auth=False))
        return asyncio.run(demo(settings, agent, Path(tmp), args, notify))


async def _print_changes(host: Any, cluster: str, outcome: Any, out: Any) -> None:
    from storage.queries import get_incident

    result = outcome.result
    changes = [("OPENED", i) for i in result.opened] + [
        ("ROOT CAUSE CHANGED", i) for i in result.root_cause_changed
    ]
    changes += [("RESOLVED", i) for i in result.resolved]
    if not changes:
        return
    async with host.sessions() as session:
        for what, incident_id in changes:
            found = await get_incident(session, incident_id)
            if found is None:
                continue
            inc = found[0]
            out.write(
                f"[{cluster}] {what} #{inc.id} {inc.severity.upper()} {inc.rule_id} {inc.subject_kind}/{inc.namespace}/{inc.subject_name}\n"
            )
            if what != "RESOLVED":
                out.write(f"    {inc.title}\n")
            elif inc.resolution:
                out.write(f"    fixed: {inc.resolution.get('summary', '')}\n")
    out.flush()


async def demo(
    settings: Settings,
    agent_settings: AgentSettings,
    tmp: Path,
    args: argparse.Namespace,
    notify: NotifySettings | None = None,
) -> int:
    from agent.cli import UserError
    from agent.demo import scenario_paths
    from agent.fakecluster.scenario import Scenario, ScenarioPlayer, play_step
    from agent.kube.gateway import Gateway
    from agent.runner import AgentHost, ClusterAgent, install_signal_handlers
    from agent.scheduler_config import SchedulerConfigError
    from storage.queries import IncidentFilter, list_incidents
    from storage.views import incident_dict

    stop = asyncio.Event()
    install_signal_handlers(stop)
    # Fixtures were recorded on other days: move their timestamps to now so ages read true.
    now = datetime.now(UTC)
    scenarios = [Scenario.load(p).rebased(now) for p in scenario_paths()]
    if args.scenario:
        unknown = set(args.scenario) - {s.name for s in scenarios}
        if unknown:
            from agent.cli import UserError

            raise UserError(
                f"--scenario: unknown {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in scenarios)}"
            )
        scenarios = [s for s in scenarios if s.name in args.scenario]
    out = sys.stderr if args.json else sys.stdout
    host = await AgentHost.open(settings.db.url, migrate=settings.db.auto_migrate, options=settings.db.engine)
    clusters: list[Any] = []
    notify = notify or NotifySettings(console=True)

    def on_pass(name: str, outcome: Any) -> Any:
        # The console sink prints every message; without it, a line per change.
        return None if notify.console else _print_changes(host, name, outcome, out)

    fixer = None if args.once else DemoFixer(host, out, args.auto_fix_after)
    try:
        url = await _serve(host, settings, out, fixer.install if fixer is not None else None)
        notifier = await host.start_notifier(notify, console=out)
        for scenario in scenarios:
            cluster = scenario.cluster()
            await cluster.start()
            clusters.append((scenario, cluster))
            if fixer is not None:
                fixer.add(scenario.name, cluster)
            kubeconfig = cluster.write_kubeconfig(tmp / f"{scenario.name}.kubeconfig")
            try:
                agent = await ClusterAgent.connect(
                    cluster=scenario.name,
                    gateway=Gateway(str(kubeconfig)),
                    sessions=host.sessions,
                    config=agent_settings.pipeline_config(),
                    renderer=host.renderer,
                    on_pass=on_pass,
                    observe_seconds=host.observe,
                    metrics_interval=1.0,
                    notifier=notifier,
                    scheduler_config=agent_settings.scheduler_config,
                )
            except SchedulerConfigError as exc:
                raise UserError(f"--scheduler-config, scenario {scenario.name}: {exc}") from None
            host.agents.append(agent)
        sign_in = (
            "no sign-in needed in the demo"
            if not settings.api.auth
            else "sign in with a token from --api-token-file"
        )
        out.write(
            f"unstick demo: {len(scenarios)} scenario(s) against in-process Kubernetes APIs\n"
            f"unstick demo: open {url}/incidents ({sign_in})\n"
        )
        out.flush()
        if args.once:
            await _play_once(host, clusters, play_step)
            if notifier is not None:
                left = await notifier.drain(timeout=120)
                if left:
                    out.write(f"unstick demo: {left} notification(s) could not be delivered yet\n")
            async with host.sessions() as session:
                page = await list_incidents(session, IncidentFilter(), limit=1000)
            incidents = [incident_dict(i) for i in sorted(page.items, key=lambda i: i.id)]
            if args.json:
                sys.stdout.buffer.write(orjson.dumps(incidents, option=orjson.OPT_INDENT_2) + b"\n")
            else:
                _print_summary(incidents)
            return 0
        for agent in host.agents:
            agent.start(stop)
        assert fixer is not None
        fixer.url = url
        players = [
            asyncio.create_task(
                ScenarioPlayer(
                    cluster,
                    scenario,
                    speed=args.speed,
                    before_step=functools.partial(fixer.hold, scenario.name, agent),
                ).play()
            )
            for (scenario, cluster), agent in zip(clusters, host.agents, strict=True)
        ]
        out.write(
            "unstick demo: playing the timelines; each incident stays open until you apply its fix "
            + (
                f"(or {args.auto_fix_after:g}s pass)"
                if args.auto_fix_after is not None
                else "on its page"
            )
            + "; Ctrl-C to stop\n"
        )
        await stop.wait()
        for task in players:
            task.cancel()
        return 0
    finally:
        await host.close()
        for _, cluster in clusters:
            with contextlib.suppress(Exception):
                await cluster.stop()


class DemoFixer:
    """The demo's "apply this remedy" action: holds each scenario's fix back while its incident
    is open, applies the remedy a person picks (or, with ``--auto-fix-after``, the first verified
    one) to the in-process cluster, then lets the timeline go on."""

    def __init__(self, host: Any, out: Any, auto_fix_after: float | None) -> None:
        self.host, self.out, self.auto_fix_after = host, out, auto_fix_after
        self.clusters: dict[str, Any] = {}  # scenario name (the incidents' cluster) → its fake cluster
        self.fixed: dict[str, asyncio.Event] = {}
        self.url = ""

    def add(self, name: str, cluster: Any) -> None:
        self.clusters[name] = cluster
        self.fixed[name] = asyncio.Event()

    def install(self, app: web.Application) -> None:
        from agent.api.keys import DEMO_APPLY, DEMO_CHANGES

        app[DEMO_APPLY] = self.apply
        app[DEMO_CHANGES] = self.changes
        app.router.add_post("/demo/incidents/{id}/apply", self._handle)

    async def _handle(self, request: web.Request) -> web.Response:
        from agent.api.pages import same_origin

        same_origin(request)
        raw_id, form = request.match_info["id"], await request.post()
        n = str(form.get("remedy", ""))
        if not raw_id.isdigit() or not n.isdigit() or len(raw_id) > 18 or len(n) > 3:
            raise web.HTTPBadRequest(text="incident id and remedy index must be small integers")
        try:
            await self.apply(int(raw_id), int(n))
        except LookupError as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        raise web.HTTPSeeOther(f"/incidents/{raw_id}")

    def changes(self, cluster: str, command: str) -> bool:
        """Whether applying ``command`` would change demo cluster ``cluster`` (the page's apply button)."""
        from agent.fakecluster.remedies import changes_cluster

        return cluster in self.clusters and changes_cluster(self.clusters[cluster], command)

    async def apply(self, incident_id: int, n: int) -> str:
        """Apply remedy ``n`` of an open incident to its demo cluster; what changed."""
        from agent.fakecluster.remedies import NotApplicable, apply_command
        from storage.queries import get_incident
        from storage.views import remedy_dict

        async with self.host.sessions() as session:
            found = await get_incident(session, incident_id)
        if found is None or found[0].cluster not in self.clusters:
            raise LookupError(f"no incident {incident_id} in the demo clusters")
        inc = found[0]
        if n >= len(inc.remedies or ()):
            raise LookupError(f"incident {incident_id} has no remedy {n}")
        if inc.status != "open":
            return "the incident is resolved already"
        remedy = remedy_dict(inc.remedies[n])
        try:
            what = apply_command(self.clusters[inc.cluster], remedy["command"])
        except NotApplicable as exc:
            what = f"nothing applied ({exc}); the scenario's recorded fix plays"
        self.out.write(f"[{inc.cluster}] APPLIED #{inc.id} remedy {n + 1} \"{remedy['title']}\": {what}\n")
        self.out.flush()
        self.fixed[inc.cluster].set()
        return what

    async def _open(self, cluster: str) -> list[Any]:
        from storage.queries import IncidentFilter, list_incidents

        async with self.host.sessions() as session:
            page = await list_incidents(session, IncidentFilter(cluster=cluster, status="open"), limit=50)
        return [i for i in page.items if i.waiting_for is None]

    async def hold(self, cluster: str, agent: Any, step: Any) -> None:
        """Before a step: while the scenario's incident is open and not fixed yet, wait for the fix."""
        if self.fixed[cluster].is_set():
            return
        await _settle(agent)
        await asyncio.sleep(agent.pipeline.config.debounce + QUIET_SECONDS)  # let the pipeline pass
        opened = await self._open(cluster)
        if not opened:
            return
        first = min(opened, key=lambda i: i.id)
        self.out.write(
            f"[{cluster}] #{first.id} stays open until its fix is applied: open {self.url}/incidents/{first.id}"
            ' and press "Apply this remedy to the demo cluster"\n'
        )
        self.out.flush()
        if self.auto_fix_after is None:
            await self.fixed[cluster].wait()
            return
        try:
            await asyncio.wait_for(self.fixed[cluster].wait(), timeout=self.auto_fix_after)
        except TimeoutError:
            remedies = first.remedies or []
            verified = [i for i, r in enumerate(remedies) if r.get("verified")]
            if remedies:
                await self.apply(first.id, (verified or [0])[0])
            self.fixed[cluster].set()


async def _serve(host: Any, settings: Settings, out: Any, configure: Any = None) -> str:
    try:
        url: str = await host.serve(settings.api, configure)
    except OSError as exc:  # e.g. 8080 taken: the demo still runs, on a free port
        out.write(
            f"unstick demo: cannot listen on {settings.api.host}:{settings.api.port} ({exc.strerror}); using a free port\n"
        )
        url = await host.serve(dataclasses.replace(settings.api, port=0), configure)
    return url


async def _settle(agent: Any) -> None:
    """Wait until the agent's cache has seen everything the endpoint sent."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STEP_TIMEOUT
    while loop.time() < deadline:
        agent.cache.changed.clear()
        await asyncio.sleep(QUIET_SECONDS)
        if not agent.cache.changed.is_set():
            return


async def _play_once(host: Any, clusters: list[Any], play_step: Any) -> None:
    """Each step of each timeline in turn: apply it, let the agent see it, analyse."""
    for agent in host.agents:
        agent.start_watching()  # passes are run step by step below, not by the pipeline loop
    for agent in host.agents:
        await asyncio.wait_for(agent.watcher.wait_synced(), timeout=STEP_TIMEOUT * 3)
    for agent, (scenario, cluster) in zip(host.agents, clusters, strict=True):
        await _pass(agent)
        for step in scenario.timeline:
            play_step(cluster, step)
            await _settle(agent)
            await _pass(agent)


async def _pass(agent: Any) -> None:
    if agent.metrics is not None:
        await agent.metrics.poll()
    await agent.pipeline.run_pass()


def _print_summary(incidents: list[dict[str, Any]]) -> None:
    print(f"\n{len(incidents)} incident(s):")
    for inc in incidents:
        s = inc["subject"]
        resolved = f"resolved {inc['resolved_at']}" if inc["status"] == "resolved" else "OPEN"
        print(
            f"\n#{inc['id']} [{inc['severity'].upper()}] {inc['rule_id']} — {s['kind']}/{s['namespace']}/{s['name']} ({resolved})"
        )
        print(f"  {inc['title']}")
        verified = [r for r in inc["remedies"] if r["verified"]]
        if verified:
            print(f"  fix (verified): {verified[0]['title']}")
            print(f"    $ {verified[0]['command']}")


def _loopback(host: str) -> bool:
    """Whether the listen host binds only this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "" (all interfaces) or a name: not provably local
