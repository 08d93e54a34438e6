"""Live-agent benchmarks (issue 5, "Speed and memory"). Prints figures; not a
timed test. Each part runs in a fresh process of its own (so RSS and CPU
pinning are not shared); ``all`` runs them one after the other.

    .venv/bin/python bench/bench_agent.py [all|latency|memory|watch] [options]

latency  FailedScheduling event -> stored incident, grace period 0. A
         FakeCluster in a child process (on the other CPU when there is one)
         serves a cluster of ``--cluster-nodes`` nodes (50) and
         ``--cluster-pods`` running pods (1,000; 10 per healthy Deployment,
         150 from 15,000 up; ``--cluster-nodes 5000 --cluster-pods 150000``
         is the issue's size); the agent (real Gateway over loopback, watcher, cache,
         pipeline, SQLite in a temp dir) runs in this process pinned to one
         CPU. The child then emits FailedScheduling events at ``--rate``/s for
         ``--seconds``: every event is about a pod that just became
         unschedulable (the pod, PodScheduled=False, is written first), a
         share ``--repeat-share`` of them repeats of the event for a pod
         already pending (the event recorder's count bump), and a new
         workload (a Deployment whose pods ask for more CPU than any node has,
         or a node pool that does not exist) starts every
         ``rate*seconds/--workloads`` events. Per workload: the time from the
         emission of its first event to the pass that stored its incident
         (the ``on_pass`` hook runs after the tracker's commit), and to the
         arrival of its ``opened`` message at a local webhook receiver (an
         aiohttp server in the agent's process; the agent's real outbox
         worker and WebhookSink, storm digests off so that every incident
         gets its own message). Also printed: the analysis of one changed
         pod: ``agent.pipeline.analyse`` (listing the changes, carrying the
         node table over, planning the scope, the report of that one
         workload), timed after the load on ``--one-pod-samples`` new pending
         pods applied to the agent's own state, the pipeline stopped.
         Targets: incident stored p99 < 100 ms, message delivered p99 < 1 s
         at 1,000 events/s; one changed pod < 5 ms median.
memory   5,000 nodes / 150,000 pods (``bench.generate``) held in a
         ClusterCache the way the agent holds them: the objects are written as
         JSON lines by a child process, then this process (with the whole
         agent imported) lists them through the real ``KindWatcher``
         (pages of 500 decoded with orjson, version bookkeeping, ``Delta``s
         into ``ClusterCache``), runs ``gc.collect()`` and reads its RSS.
         Target: < 600 MB for the whole agent process. ``--via-watch N``
         also loads N pods (N/30 nodes) through a FakeCluster and the real
         Gateway (HTTP list + watch), for comparison.
one-pod  the one-changed-pod figure of ``latency`` alone, the cluster written straight
         into a ClusterState (no FakeCluster, no HTTP): ``--stuck-workloads``
         workloads with 5 pending pods each, one whole-cluster pass, then
         ``--one-pod-samples`` changed pods; ``--profile`` prints where they go.
watch    watch events/s through gateway, cache and pipeline vs a bare orjson
         decode: runs ``bench/bench_watch.py`` (a smaller stream by default).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gcmeter import GcMeter  # noqa: E402

Obj = dict[str, Any]


# ---------------------------------------------------------------------------
# helpers


def _pin(cpu: int) -> int | None:
    """Pin this process to the ``cpu``-th allowed CPU; returns the CPU or None."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    chosen = cpus[cpu % len(cpus)]
    os.sched_setaffinity(0, {chosen})
    return chosen


def _rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MB, from /proc/self/status."""
    cur = peak = 0.0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    return cur, peak


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def _quiet_logs() -> None:
    logging.basicConfig(level=logging.ERROR)
    for name in ("agent", "analyzers", "storage", "aiohttp", "kubernetes_asyncio"):
        logging.getLogger(name).setLevel(logging.ERROR)


# ---------------------------------------------------------------------------
# (a) latency: event -> stored incident


NODE_COUNT = 50  # --cluster-nodes
HEALTHY_DEPLOYMENTS = 100  # --cluster-pods / HEALTHY_REPLICAS, at least 100
HEALTHY_REPLICAS = 10  # 10, or 150 from 15,000 pods up


def _size(nodes: int, pods: int) -> None:
    """Set the healthy cluster's size (in the process that builds it)."""
    global NODE_COUNT, HEALTHY_DEPLOYMENTS, HEALTHY_REPLICAS
    NODE_COUNT = nodes
    HEALTHY_REPLICAS = 10 if pods < 15_000 else 150
    HEALTHY_DEPLOYMENTS = max(1, pods // HEALTHY_REPLICAS)


NAMESPACES = ("shop", "search", "payments", "ml", "batch")
HASH = "5c8d7f9b6d"


def _stuck_spec(k: int) -> tuple[dict[str, str], dict[str, str] | None, str]:
    """(requests, nodeSelector, scheduler message) of stuck workload k."""
    n = NODE_COUNT
    if k % 2:
        return (
            {"cpu": "250m", "memory": "256Mi"},
            {"node-pool": "arm64"},
            f"0/{n} nodes are available: {n} node(s) didn't match Pod's node affinity/selector. "
            f"preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
        )
    return (
        {"cpu": "16", "memory": "4Gi"},
        None,
        f"0/{n} nodes are available: {n} Insufficient cpu. "
        f"preemption: 0/{n} nodes are available: {n} No preemption victims found for incoming pod.",
    )


def _workload(
    name: str, ns: str, replicas: int, requests: dict[str, str], selector: dict[str, str] | None
) -> tuple[Obj, Obj, Obj]:
    """A Deployment, its ReplicaSet (same template) and the pod template spec."""
    from agent.fakecluster.samples import pod

    template_pod = pod(
        f"{name}-{HASH}-xxxxx", ns, requests=requests, node_selector=selector, managed_fields=False
    )
    spec = template_pod["spec"]
    labels = {"app": name, "pod-template-hash": HASH}
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"{ns}-{name}-deploy",
            "generation": 1,
            "annotations": {"deployment.kubernetes.io/revision": "1"},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
        "status": {
            "observedGeneration": 1,
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
        },
    }
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{name}-{HASH}",
            "namespace": ns,
            "uid": f"{ns}-{name}-rs",
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "uid": f"{ns}-{name}-deploy",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }
    return dep, rs, spec


def _populate(
    cluster: Any, workloads: int
) -> list[tuple[str, str, Obj, str, dict[str, str], dict[str, str] | None]]:
    """The healthy cluster, plus the (not yet failing) Deployments of the stuck workloads."""
    from agent.fakecluster.samples import node, pod

    zones = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
    names = []
    for i in range(NODE_COUNT):
        name = f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal"
        names.append(name)
        cluster.apply(
            node(name, labels={"topology.kubernetes.io/zone": zones[i % 3], "node-pool": "general"}),
            copy=False,
        )
    k = 0
    for d in range(HEALTHY_DEPLOYMENTS):
        ns = NAMESPACES[d % len(NAMESPACES)]
        name = f"web-{d:03d}"
        dep, rs, _ = _workload(name, ns, HEALTHY_REPLICAS, {"cpu": "100m", "memory": "128Mi"}, None)
        cluster.apply(dep, copy=False)
        cluster.apply(rs, copy=False)
        for r in range(HEALTHY_REPLICAS):
            cluster.apply(
                pod(
                    f"{name}-{HASH}-{r:05d}",
                    ns,
                    node_name=names[k % NODE_COUNT],
                    requests={"cpu": "100m", "memory": "128Mi"},
                    owner=rs,
                ),
                copy=False,
            )
            k += 1
    stuck = []
    for w in range(workloads):
        ns = NAMESPACES[w % len(NAMESPACES)]
        name = f"stuck-{w:04d}"
        requests, selector, message = _stuck_spec(w)
        dep, rs, _ = _workload(name, ns, 0, requests, selector)
        cluster.apply(dep, copy=False)
        cluster.apply(rs, copy=False)
        stuck.append((name, ns, rs, message, requests, selector))
    return stuck


def _stuck_pod(entry: tuple[str, str, Obj, str, dict[str, str], dict[str, str] | None], suffix: str) -> Obj:
    """A pending pod of a stuck workload (``_populate``'s entry), PodScheduled=False."""
    from agent.fakecluster.samples import pod

    name, ns, rs, message, requests, selector = entry
    return pod(
        f"{name}-{HASH}-{suffix}",
        ns,
        requests=requests,
        node_selector=selector,
        owner=rs,
        unschedulable_message=message,
        managed_fields=False,
    )


async def _produce(
    cluster: Any,
    stuck: list[tuple[str, str, Obj, str, dict[str, str], dict[str, str] | None]],
    rate: float,
    seconds: float,
    repeat_share: float,
    seed: int,
) -> dict[str, Any]:
    """Emit ``rate*seconds`` FailedScheduling events on schedule; returns the
    first emission time (time.monotonic) of each workload."""
    from agent.fakecluster.samples import event

    rng = random.Random(seed)
    total = int(rate * seconds)
    spacing = max(1, total // len(stuck))
    first: dict[str, float] = {}
    active: list[int] = []
    pods_of: dict[int, int] = {}
    events: list[Obj] = []  # the last version of each pending pod's event, for repeats
    created_pods = 0
    repeats = 0
    lag_max = 0.0

    def new_pod(w: int) -> Obj:
        nonlocal created_pods
        message = stuck[w][3]
        n = pods_of.get(w, 0)
        pods_of[w] = n + 1
        obj = _stuck_pod(stuck[w], f"{n:05d}")
        cluster.apply(obj, copy=False)
        created_pods += 1
        ev = event(obj, message=message, name=f"{obj['metadata']['name']}.{created_pods:016x}")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ev["firstTimestamp"] = ev["lastTimestamp"] = stamp
        ev["metadata"]["creationTimestamp"] = stamp
        return ev

    start = time.monotonic()
    k = 0
    while k < total:
        now = time.monotonic()
        due = min(total, int((now - start) * rate) + 1)
        lag_max = max(lag_max, (now - start) - k / rate)  # how far the producer is behind its schedule
        while k < due:
            w_new = k // spacing
            if k % spacing == 0 and w_new < len(stuck):
                ev = new_pod(w_new)
                cluster.apply(ev, copy=False)
                first[stuck[w_new][0]] = time.monotonic()
                active.append(w_new)
                events.append(ev)
            elif events and rng.random() < repeat_share:
                j = rng.randrange(len(events))
                old = events[j]
                bumped = {
                    **old,
                    "metadata": {kk: v for kk, v in old["metadata"].items() if kk != "resourceVersion"},
                    "count": int(old.get("count", 1)) + 1,
                    "lastTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
                cluster.apply(bumped, copy=False)
                events[j] = bumped
                repeats += 1
            else:
                ev = new_pod(rng.choice(active))
                cluster.apply(ev, copy=False)
                events.append(ev)
            k += 1
        await asyncio.sleep(0.002)
    elapsed = time.monotonic() - start
    return {
        "first": first,
        "events": total,
        "repeats": repeats,
        "pods": created_pods,
        "elapsed": elapsed,
        "lag_max": lag_max,
    }


def _serve_latency(conn: Connection, args: dict[str, Any], pin: bool) -> None:
    if pin:
        _pin(1)
    _quiet_logs()
    _size(args["nodes"], args["pods"])

    async def main() -> None:
        from agent.fakecluster import FakeCluster

        cluster = FakeCluster(bookmark_interval=5, history_size=200_000)
        stuck = _populate(cluster, args["workloads"])
        url = await cluster.start()
        conn.send({"url": url, "objects": cluster.resource_version})
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, conn.recv)  # "go"
        result = await _produce(
            cluster, stuck, args["rate"], args["seconds"], args["repeat_share"], args["seed"]
        )
        conn.send(result)
        await loop.run_in_executor(None, conn.recv)  # "stop"
        await cluster.stop()

    asyncio.run(main())


async def _latency_agent(conn: Connection, info: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    import agent.pipeline as pipeline_mod
    from agent.fakecluster import write_kubeconfig
    from agent.kube.gateway import Gateway
    from agent.notify.settings import NotifySettings
    from agent.pipeline import PassOutcome, PipelineConfig
    from agent.runner import AgentHost, ClusterAgent
    from agent.settings import Secret
    from analyzers.lifecycle import NotifyPolicy

    analysis: list[tuple[float, float, int]] = []  # (start, build_report seconds, pending pods)
    # (start, analyse seconds, workloads in scope or -1 for the whole cluster)
    analysed: list[tuple[float, float, int]] = []
    from analyzers.report import build_report

    analyse = pipeline_mod.analyse

    def timed_build_report(snapshot: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        report = build_report(snapshot, **kwargs)
        analysis.append((t0, time.monotonic() - t0, len(report.pods)))
        return report

    def timed_analyse(*a: Any, **kw: Any) -> Any:
        t0 = time.monotonic()
        out = analyse(*a, **kw)
        scope = out[1].workloads
        analysed.append((t0, time.monotonic() - t0, -1 if scope is None else len(scope)))
        return out

    # Diagnostics only: how much of a pass is the analysis (the rest: tracking, holds).
    setattr(pipeline_mod, "build_report", timed_build_report)  # noqa: B010
    setattr(pipeline_mod, "analyse", timed_analyse)  # noqa: B010
    opened: dict[str, float] = {}
    received: dict[str, float] = {}
    delivered: dict[str, float] = {}  # workload -> its "opened" message at the webhook receiver
    passes: list[tuple[float, float, int]] = []  # (end time, seconds, findings)
    from aiohttp import web

    async def hook(request: web.Request) -> web.Response:
        doc = orjson.loads(await request.read())
        if doc.get("event") == "opened":
            name = ((doc.get("incident") or {}).get("subject") or {}).get("name", "")
            delivered.setdefault(name, time.monotonic())
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    receiver = web.AppRunner(app, access_log=None)
    await receiver.setup()
    site = web.TCPSite(receiver, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", info["url"])
        host = await AgentHost.open(f"sqlite+aiosqlite:///{tmp}/agent.db")
        notifier = await host.start_notifier(
            NotifySettings(
                webhook_urls=(Secret(f"http://127.0.0.1:{port}/hook"),),
                webhook_secret=Secret("bench-secret-0123456789"),
            )
        )

        def on_pass(cluster: str, outcome: PassOutcome) -> None:
            t = time.monotonic()
            passes.append((t, outcome.seconds, len(outcome.report.findings)))
            for f in outcome.tracked:
                opened.setdefault(f.subject.name, t)

        agent = await ClusterAgent.connect(
            cluster="bench",
            gateway=Gateway(str(kubeconfig), request_timeout=30, connect_timeout=5, watch_idle_timeout=30),
            sessions=host.sessions,
            config=PipelineConfig(
                grace=0,
                debounce=args.debounce,
                resync=5.0,
                # One message per incident: the delivery of each is measured.
                notify_policy=NotifyPolicy(storm_threshold=10**9),
            ),
            renderer=host.renderer,
            on_pass=on_pass,
            metrics_interval=3600,
            notifier=notifier,
        )
        host.agents.append(agent)
        forward = agent.cache.on_event

        def on_event(ev: dict[str, Any]) -> None:
            name = (ev.get("involvedObject") or {}).get("name", "")
            if name.startswith("stuck-"):
                received.setdefault(name.split("-")[0] + "-" + name.split("-")[1], time.monotonic())
            if forward is not None:
                forward(ev)

        agent.cache.on_event = on_event
        stop = asyncio.Event()
        agent.start(stop)
        try:
            t0 = time.monotonic()
            await asyncio.wait_for(agent.watcher.wait_synced(), 900)
            while not passes:
                await asyncio.sleep(0.05)
            synced = time.monotonic() - t0
            loop = asyncio.get_running_loop()
            base_passes = len(passes)
            gc_meter = GcMeter().start()
            load_cpu = time.process_time()
            conn.send("go")
            produced: dict[str, Any] = await loop.run_in_executor(None, conn.recv)
            want = set(produced["first"])
            deadline = time.monotonic() + args.drain
            while not (want <= set(opened) and want <= set(delivered)) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            cache_pods = len(agent.cache.state.snapshot().pods)
            load_cpu = time.process_time() - load_cpu
            gc_meter.stop()
            stop.set()
            await asyncio.sleep(0.5)
            one_pod = _one_changed_pod(
                agent.cache.state,
                agent.pipeline._previous,
                agent.pipeline.config.kube_version,
                host.renderer,
                analyse,
                args.one_pod_samples,
            )
        finally:
            stop.set()
            await host.close()
            await receiver.cleanup()
            setattr(pipeline_mod, "build_report", build_report)  # noqa: B010
            setattr(pipeline_mod, "analyse", analyse)  # noqa: B010
    during = passes[base_passes:]
    go = passes[base_passes - 1][0] if base_passes else 0.0
    return {
        "produced": produced,
        "opened": opened,
        "received": received,
        "delivered": delivered,
        "passes": during,
        "synced": synced,
        "cache_pods": cache_pods,
        "gc": gc_meter,
        "cpu": load_cpu,
        "analysis": [(t - go, sec, n) for t, sec, n in analysis if t >= go],
        "analysed": [(t - go, sec, n) for t, sec, n in analysed if t >= go],
        "one_pod": one_pod,
    }


def _one_changed_pod(
    state: Any, previous: Any, kube_version: str | None, renderer: Any, analyse: Any, samples: int
) -> list[tuple[float, float]]:
    """One new pending pod of a stuck workload at a time, applied to the agent's own state
    (the pipeline stopped), then the state's snapshot and the pipeline's ``analyse`` of it
    against the snapshot of the pass before (the changes read from the journal, the
    indexes carried over, the scope planned, the report of that workload built), timed.
    (snapshot seconds, analyse seconds) per sample."""
    previous = previous or state.snapshot()
    out = []
    for k in range(samples):
        w = k % 50
        name, ns = f"stuck-{w:04d}", NAMESPACES[w % len(NAMESPACES)]
        requests, selector, message = _stuck_spec(w)
        _, rs, _ = _workload(name, ns, 0, requests, selector)
        state.apply_object(_stuck_pod((name, ns, rs, message, requests, selector), f"one{k:04d}"))
        t0 = time.perf_counter()
        current = state.snapshot()
        t1 = time.perf_counter()
        analyse(
            current,
            previous,
            now=time.time(),
            kube_version=kube_version,
            renderer=renderer,
            full=False,
            known=frozenset(),
            carried=(),
            always=frozenset(),
            batch=16,
        )
        out.append((t1 - t0, time.perf_counter() - t1))
        previous = current
    return out


class _StateSink:
    """``_populate``'s cluster, writing straight into a ClusterState."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def apply(self, obj: Obj, copy: bool = True) -> None:
        self.state.apply_object(obj)


def run_one_pod(args: argparse.Namespace) -> int:
    """The one-changed-pod figure without the HTTP load: the cluster written straight into
    a ClusterState (no FakeCluster, no watch), ``--stuck-workloads`` workloads with 5
    pending pods and a FailedScheduling event each, one whole-cluster pass, then
    ``--one-pod-samples`` changed pods as in ``latency``."""
    from agent.fakecluster.samples import event
    from agent.pipeline import analyse
    from analyzers.remedies import RemedyRenderer
    from analyzers.snapshot import ClusterState

    _size(args.cluster_nodes, args.cluster_pods)
    state = ClusterState()
    t0 = time.perf_counter()
    stuck = _populate(_StateSink(state), args.stuck_workloads)
    for entry in stuck:
        for n in range(5):
            obj = _stuck_pod(entry, f"{n:05d}")
            state.apply_object(obj)
            state.apply_object(event(obj, message=entry[3], name=f"{obj['metadata']['name']}.{n:016x}"))
    loaded = time.perf_counter() - t0
    renderer = RemedyRenderer()
    plan: dict[str, Any] = {"known": frozenset(), "carried": (), "always": frozenset(), "batch": 16}
    t0 = time.perf_counter()
    first = state.snapshot()
    analyse(first, None, now=time.time(), kube_version=None, renderer=renderer, full=True, **plan)
    whole = time.perf_counter() - t0
    print(
        f"one-pod: {len(first.nodes):,} nodes, {len(first.pods):,} pods "
        f"({len(first.pending_pods()):,} pending) loaded in {loaded:.1f} s; whole-cluster pass {whole:.2f} s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    samples = _one_changed_pod(state, first, None, renderer, analyse, args.one_pod_samples)
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    snap_ms = [a * 1000 for a, _ in samples]
    one = [b * 1000 for _, b in samples]
    both = [(a + b) * 1000 for a, b in samples]
    print(
        f"  analysis of one changed pod: median {_pct(one, 0.5):.2f} ms, max {max(one):.2f} ms over {len(one)} "
        f"(target < 5 ms median); with the snapshot: median {_pct(both, 0.5):.2f} ms "
        f"(the snapshot alone {_pct(snap_ms, 0.5):.2f} ms); load average {os.getloadavg()[0]:.1f}"
    )
    return 0


def run_latency(args: argparse.Namespace) -> int:
    _quiet_logs()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    pin = not args.no_pin and hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) > 1
    spec = {
        "workloads": args.stuck_workloads,
        "rate": args.rate,
        "seconds": args.seconds,
        "repeat_share": args.repeat_share,
        "seed": 1,
        "nodes": args.cluster_nodes,
        "pods": args.cluster_pods,
    }
    server = ctx.Process(target=_serve_latency, args=(child, spec, pin), daemon=True)
    server.start()
    info = parent.recv()
    cpu = _pin(0) if not args.no_pin else None
    _size(args.cluster_nodes, args.cluster_pods)
    try:
        out = asyncio.run(_latency_agent(parent, info, args))
    finally:
        with contextlib.suppress(Exception):
            parent.send("stop")
        server.join(15)
    produced, opened, received = out["produced"], out["opened"], out["received"]
    first = produced["first"]
    lat = [(opened[w] - t) * 1000 for w, t in first.items() if w in opened]
    delivery = [(received[w] - t) * 1000 for w, t in first.items() if w in received]
    messaged = [(out["delivered"][w] - t) * 1000 for w, t in first.items() if w in out["delivered"]]
    missing = sorted(set(first) - set(opened))
    unsent = sorted(set(first) - set(out["delivered"]))
    pass_s = [p[1] * 1000 for p in out["passes"]]
    print(
        f"agent: pinned to CPU {cpu}; FakeCluster in a child process{' on the other CPU' if pin else ''}; "
        f"initial list of {info['objects']:,} objects synced and first pass done in {out['synced']:.1f} s"
    )
    print(
        f"load: {produced['events']:,} FailedScheduling events in {produced['elapsed']:.1f} s "
        f"({produced['events'] / produced['elapsed']:,.0f}/s; {produced['pods']:,} new pending pods, "
        f"{produced['repeats']:,} repeats) across {len(first)} workloads; producer at most "
        f"{produced['lag_max'] * 1000:.0f} ms behind schedule; debounce {args.debounce * 1000:.0f} ms, grace 0"
    )
    print(
        f"passes during the load: {len(pass_s)}, pass duration p50 {_pct(pass_s, 0.5):.0f} ms, "
        f"p99 {_pct(pass_s, 0.99):.0f} ms, max {max(pass_s, default=0):.0f} ms; pods in the cache at the end {out['cache_pods']:,}"
    )
    if out["analysis"]:
        ana = [a[1] * 1000 for a in out["analysis"]]
        print(
            f"  of which build_report: p50 {_pct(ana, 0.5):.0f} ms, p99 {_pct(ana, 0.99):.0f} ms; by time into the run "
            "(s: ms for N pending pods): "
            + ", ".join(
                f"{t:.1f}: {sec * 1000:.0f} for {n}"
                for t, sec, n in out["analysis"][:: max(1, len(out["analysis"]) // 8)]
            )
        )
    one = [sec * 1000 for _, sec in out["one_pod"]]
    whole = [sec * 1000 for _, sec, n in out["analysed"] if n == -1]
    scoped = [sec * 1000 for _, sec, n in out["analysed"] if n >= 0]
    print(
        f"  analysis of one changed pod (after the load: a new pending pod, analyse scoped to its workload): "
        f"median {_pct(one, 0.5):.1f} ms, max {max(one, default=float('nan')):.1f} ms over {len(one)} "
        f"(target < 5 ms median); scoped passes during the load "
        f"median {_pct(scoped, 0.5):.1f} ms over {len(scoped)}; whole-cluster passes: {len(whole)}"
        + (f", median {_pct(whole, 0.5):.0f} ms" if whole else "")
    )
    print(f"  agent process CPU during the load and drain: {out['cpu']:.1f} s; cyclic GC: {out['gc']}")
    if delivery:
        print(
            f"event emitted -> in the agent's cache: p50 {_pct(delivery, 0.5):.1f} ms, p99 {_pct(delivery, 0.99):.1f} ms"
        )
    ok = bool(lat) and not missing and _pct(lat, 0.99) < 100
    print(
        f"event emitted -> incident stored: p50 {_pct(lat, 0.5):.0f} ms, p90 {_pct(lat, 0.9):.0f} ms, "
        f"p99 {_pct(lat, 0.99):.0f} ms, max {max(lat, default=float('nan')):.0f} ms over {len(lat)} workloads"
        + (f"; {len(missing)} workloads without an incident after {args.drain:.0f} s" if missing else "")
    )
    print(
        f"event emitted -> opened message at the webhook receiver: p50 {_pct(messaged, 0.5):.0f} ms, "
        f"p90 {_pct(messaged, 0.9):.0f} ms, p99 {_pct(messaged, 0.99):.0f} ms, max {max(messaged, default=float('nan')):.0f} ms"
        + (f"; {len(unsent)} workloads without a message after {args.drain:.0f} s" if unsent else "")
    )
    sent_ok = bool(messaged) and not unsent and _pct(messaged, 0.99) < 1000
    at_rate = args.rate >= 1000
    print(
        f"targets at {args.rate:,.0f} events/s on {args.cluster_nodes:,} nodes / {args.cluster_pods:,} pods: "
        f"incident stored p99 < 100 ms {'met' if ok else 'NOT met'}; "
        f"message delivered p99 < 1 s {'met' if sent_ok else 'NOT met'}"
        + ("" if at_rate else " (below 1,000 events/s)")
    )
    return 0


# ---------------------------------------------------------------------------
# (b) memory


def _write_jsonl(path: str, nodes: int, pods: int, workloads: int) -> dict[str, int]:
    """Generate the cluster and write it as JSON lines (one object per line,
    with a resourceVersion as the API server would give it)."""
    from bench.generate import generate

    objs = generate(nodes, pods, workloads)
    counts: dict[str, int] = {}
    with open(path, "wb") as fh:
        for rv, obj in enumerate(objs, 1):
            obj["metadata"]["resourceVersion"] = str(rv)
            counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
            fh.write(orjson.dumps(obj))
            fh.write(b"\n")
    return counts


class _FileSource:
    """A KubeSource listing the objects of one JSON-lines file, page by page,
    decoding each page's objects from bytes as the gateway does."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lines: dict[str, list[int]] = {}

    def index(self) -> None:
        """Remember each kind's line offsets (the objects stay on disk)."""
        with open(self.path, "rb") as fh:
            pos = 0
            for line in fh:
                kind = orjson.loads(line)["kind"]
                self._lines.setdefault(kind, []).append(pos)
                pos += len(line)

    async def list_page(
        self,
        kind: Any,
        *,
        namespace: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> Any:
        offsets = self._lines.get(kind.kind, [])
        start = int(continue_token or 0)
        end = min(len(offsets), start + (limit or len(offsets)))
        items = []
        with open(self.path, "rb") as fh:
            for off in offsets[start:end]:
                fh.seek(off)
                items.append(orjson.loads(fh.readline()))
        meta: dict[str, Any] = {"resourceVersion": "999999999"}
        if end < len(offsets):
            meta["continue"] = str(end)
        return {"items": items, "metadata": meta}

    def watch(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError


def _metrics_sample(snap: Any) -> Any:
    """NodeMetrics for every node and PodMetrics for every running pod, usage at
    half the requests (the dicts metrics-server lists)."""
    from agent.kube.watcher import MetricsSample

    stamp = "2024-05-01T11:59:40Z"
    nodes = [
        {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "NodeMetrics",
            "metadata": {"name": n.name, "labels": dict(n.labels)},
            "timestamp": stamp,
            "window": "20.043s",
            "usage": {"cpu": "4000m", "memory": "20Gi"},
        }
        for n in snap.nodes.values()
    ]
    pods = [
        {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "PodMetrics",
            "metadata": {"name": p.name, "namespace": p.namespace},
            "timestamp": stamp,
            "window": "15.412s",
            "containers": [
                {
                    "name": "main",
                    "usage": {
                        "cpu": f"{max(p.spec.requests.get('cpu', 0) // 2, 1)}m",
                        "memory": f"{max(p.spec.requests.get('memory', 0) // 2 // 2**20, 1)}Mi",
                    },
                }
            ],
        }
        for p in snap.pods.values()
        if p.node_name
    ]
    return MetricsSample(nodes=nodes, pods=pods)


def run_memory(args: argparse.Namespace) -> int:
    cpu = _pin(0) if not args.no_pin else None
    _quiet_logs()
    # The whole agent, imported as `unstick watch` does.
    import agent.runner  # noqa: F401
    import analyzers.report  # noqa: F401
    from agent.cache import ClusterCache
    from agent.kube.kinds import WATCHED_KINDS
    from agent.kube.watcher import KindWatcher
    from analyzers.snapshot import ClusterState

    gc.collect()
    base, _ = _rss_mb()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cluster.jsonl")
        ctx = mp.get_context("spawn")
        with ctx.Pool(1) as pool:  # generate in another process: its dicts never touch this heap
            counts = pool.apply(_write_jsonl, (path, args.nodes, args.pods, args.workloads))
        size = os.path.getsize(path)
        source = _FileSource(path)
        source.index()
        gc.collect()
        cache = ClusterCache(ClusterState())

        async def load() -> int:
            total = 0
            for kind in WATCHED_KINDS:
                if kind.kind not in source._lines:
                    continue
                w = KindWatcher(source, kind, cache, page_size=500)
                await w.list_once()
                total += w.known_count
                watchers.append(w)
            return total

        watchers: list[Any] = []
        t0 = time.perf_counter()
        listed = asyncio.run(load())
        seconds = time.perf_counter() - t0
        source._lines.clear()
        gc.collect()
        rss, peak = _rss_mb()
        snap = cache.state.snapshot()
        pods = len(snap.pods)
        print(
            f"cluster: {counts.get('Node', 0):,} nodes, {counts.get('Pod', 0):,} pods, {sum(counts.values()):,} objects "
            f"({size / 2**20:.0f} MiB of JSON lines, generated in a child process)"
        )
        print(
            f"load: {listed:,} objects listed through KindWatcher -> ClusterCache in {seconds:.1f} s "
            f"(pinned to CPU {cpu}); cache stats: applied {cache.stats.applied:,}, malformed {cache.stats.malformed}"
        )
        held = rss - base
        print(
            f"RSS of the agent process after gc.collect(): {rss:.0f} MB (peak so far {peak:.0f} MB); "
            f"before loading {base:.0f} MB (agent, analyzers, sqlalchemy, kubernetes-asyncio imported)"
        )
        print(
            f"held for the cluster: {held:.0f} MB = {held * 2**20 / max(pods, 1):.0f} bytes per pod "
            f"(nodes, workloads and the watchers' version bookkeeping included)"
        )
        print(f"target (< 600 MB RSS for the whole agent process): {'met' if rss < 600 else 'NOT met'}")
        if not args.no_metrics:
            # metrics-server's view of the same cluster, polled as MetricsPoller does.
            sample = _metrics_sample(snap)
            t0 = time.perf_counter()
            cache.apply_metrics(sample)
            seconds = time.perf_counter() - t0
            n_node, n_pod = len(sample.nodes), len(sample.pods)
            del sample
            gc.collect()
            rss, peak = _rss_mb()
            snap = cache.state.snapshot()
            print(
                f"with metrics.k8s.io ({n_node:,} NodeMetrics, {n_pod:,} PodMetrics applied in {seconds:.1f} s): "
                f"RSS {rss:.0f} MB (peak so far {peak:.0f} MB): {'met' if rss < 600 else 'NOT met'}"
            )
        if not args.no_analysis:
            from analyzers.report import build_report

            t0 = time.perf_counter()
            report = build_report(snap, now=time.time())
            seconds = time.perf_counter() - t0
            del report
            gc.collect()
            after, peak = _rss_mb()
            print(
                f"one analysis pass over it (build_report, {len(snap.unscheduled_pods())} pending pods): {seconds:.1f} s; "
                f"RSS after {after:.0f} MB, peak during the pass {peak:.0f} MB"
            )
        del snap
    if args.via_watch:
        print(_via_watch(args))
    return 0


def _serve_objects(conn: Connection, nodes: int, pods: int, workloads: int, pin: bool) -> None:
    if pin:
        _pin(1)
    gc.disable()

    async def main() -> None:
        from agent.fakecluster import FakeCluster
        from bench.generate import generate

        cluster = FakeCluster(bookmark_interval=60, history_size=10)
        for obj in generate(nodes, pods, workloads):
            if obj["kind"] in ("Namespace",):
                continue
            cluster.apply(obj, copy=False)
        url = await cluster.start()
        conn.send({"url": url})
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        await cluster.stop()

    asyncio.run(main())


def _via_watch(args: argparse.Namespace) -> str:
    """Run the real agent's list/watch path (Gateway over HTTP) into a ClusterCache in a fresh process."""
    cmd = [
        sys.executable,
        __file__,
        "memory-http",
        "--pods",
        str(args.via_watch),
        "--nodes",
        str(max(1, args.via_watch // 30)),
        "--workloads",
        str(args.workloads),
    ] + (["--no-pin"] if args.no_pin else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return done.stdout.rstrip() + (("\n" + done.stderr[-2000:]) if done.returncode else "")


def run_memory_http(args: argparse.Namespace) -> int:
    _quiet_logs()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    pin = not args.no_pin and hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) > 1
    server = ctx.Process(
        target=_serve_objects, args=(child, args.nodes, args.pods, args.workloads, pin), daemon=True
    )
    server.start()
    info = parent.recv()
    if not args.no_pin:
        _pin(0)
    import agent.runner  # noqa: F401
    from agent.cache import ClusterCache
    from agent.fakecluster import write_kubeconfig
    from agent.kube.gateway import Gateway
    from agent.kube.watcher import Watcher
    from analyzers.snapshot import ClusterState

    gc.collect()
    base, _ = _rss_mb()

    async def main() -> tuple[float, int]:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", info["url"])
            cache = ClusterCache(ClusterState())
            async with Gateway(str(kubeconfig), request_timeout=120) as gateway:
                watcher = Watcher(gateway, cache)
                t0 = time.perf_counter()
                task = asyncio.create_task(watcher.run())
                await asyncio.wait_for(watcher.wait_synced(), 600)
                seconds = time.perf_counter() - t0
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            global _KEEP
            _KEEP = (cache, watcher)
            return seconds, len(cache.state.snapshot().pods)

    try:
        seconds, pods = asyncio.run(main())
    finally:
        parent.send("stop")
        server.join(15)
    gc.collect()
    rss, peak = _rss_mb()
    held = rss - base
    print(
        f"via the real Gateway (HTTP list+watch from a FakeCluster), {args.nodes:,} nodes / {pods:,} pods: synced in "
        f"{seconds:.1f} s; RSS {rss:.0f} MB (peak {peak:.0f} MB, {base:.0f} MB before), "
        f"{held * 2**20 / max(pods, 1):.0f} bytes per pod held"
    )
    return 0


_KEEP: Any = None


# ---------------------------------------------------------------------------
# (c) watch throughput


def run_watch(args: argparse.Namespace) -> int:
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "bench_watch.py"),
        "--events",
        str(args.watch_events),
        "--repeat",
        str(args.watch_repeat),
    ]
    if args.no_pin:
        cmd.append("--no-pin")
    print(
        f"running: bench/bench_watch.py --events {args.watch_events} --repeat {args.watch_repeat}", flush=True
    )
    rc = subprocess.run(cmd, check=False).returncode
    print(
        "and the same stream into the agent's ClusterCache (Pipeline.on_event collecting triggers; no passes;"
        " start-up heap gc.freeze()d as the agent does after its initial list):",
        flush=True,
    )
    return rc | run_watch_cache(args)


def run_watch_cache(args: argparse.Namespace) -> int:
    """bench_watch's server and stream, watched by KindWatcher into a
    ClusterCache whose events feed Pipeline.on_event, as in the agent."""
    import bench.bench_watch as bw

    _quiet_logs()
    mix = {"Pod": 0.6, "Node": 0.1, "Event": 0.3}
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    pin = not args.no_pin and hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) > 1
    server = ctx.Process(target=bw._serve, args=(child, args.watch_events, mix, pin), daemon=True)
    server.start()
    info = parent.recv()
    if not args.no_pin:
        _pin(0)

    async def measure() -> tuple[list[float], list[float], int]:
        from agent.cache import ClusterCache
        from agent.fakecluster import write_kubeconfig
        from agent.kube.gateway import Gateway
        from agent.kube.watcher import KindWatcher
        from agent.pipeline import Pipeline, PipelineConfig
        from analyzers.snapshot import ClusterState

        url, start_rv, counts = info["url"], info["start_rv"], info["counts"]
        total = sum(counts.values())
        bare: list[float] = []
        cached: list[float] = []
        triggers = 0
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", url)
            async with Gateway(str(kubeconfig), watch_idle_timeout=60) as gateway:
                await bw.bare(url, start_rv, counts)  # warm up
                # The agent freezes its start-up heap once the initial list is in
                # (ClusterAgent._analyse: gc.freeze()), so that the watch stream
                # that follows never has the collector rescan it; do the same
                # here, before any timed run. The GC stays enabled while a run is
                # timed, bare and cached alike.
                gc.collect()
                gc.freeze()
                for _ in range(args.watch_repeat):
                    # The previous run's cache and pipeline refer to each other
                    # (cache.on_event is a bound method of the pipeline): only the
                    # cyclic GC frees them. Collect before each timed run so that
                    # no run pays for the one before.
                    gc.collect()
                    t0 = time.perf_counter()
                    n = await bw.bare(url, start_rv, counts)
                    bare.append(n / (time.perf_counter() - t0))
                    gc.collect()
                    cache = ClusterCache(ClusterState())
                    pipeline = Pipeline(cache, None, PipelineConfig())  # type: ignore[arg-type]
                    cache.on_event = pipeline.on_event

                    class Sink:
                        def __init__(self, cache: ClusterCache, expected: int) -> None:
                            self.cache, self.expected, self.seen = cache, expected, 0

                        async def delta(self, delta: Any) -> None:
                            self.cache.apply(delta)
                            self.seen += 1
                            if self.seen >= self.expected:
                                raise bw._Done

                        async def synced(self, kind: str) -> None:
                            pass

                    async def one(kind: Any, cache: ClusterCache = cache) -> int:
                        sink = Sink(cache, counts[kind.kind])
                        watcher = KindWatcher(gateway, kind, sink, watch_timeout=600, min_watch_duration=0)
                        watcher.resource_version = str(start_rv)
                        with contextlib.suppress(bw._Done):
                            await watcher.watch_once()
                        return sink.seen

                    t0 = time.perf_counter()
                    n = sum(await asyncio.gather(*(one(k) for k in bw.KINDS)))
                    seconds = time.perf_counter() - t0
                    if n != total:
                        raise SystemExit(f"watcher into the cache: got {n} events, expected {total}")
                    cached.append(n / seconds)
                    triggers = pipeline.stats.triggers
        return bare, cached, triggers

    try:
        bare, cached, triggers = asyncio.run(measure())
    finally:
        gc.unfreeze()
        parent.send("stop")
        server.join(10)
    b, c = statistics.median(bare), statistics.median(cached)
    print(
        f"  bare aiohttp lines + orjson.loads                      {b:>10,.0f} events/s   (runs: {', '.join(f'{r:,.0f}' for r in bare)})"
    )
    print(
        f"  KindWatcher -> ClusterCache -> Pipeline.on_event       {c:>10,.0f} events/s   (runs: {', '.join(f'{r:,.0f}' for r in cached)}; {triggers:,} triggers)"
    )
    print(
        f"  per event (medians): bare {1e6 / b:.1f} µs, cache path {1e6 / c:.1f} µs "
        f"(+{1e6 / c - 1e6 / b:.1f} µs: watcher bookkeeping, decoding into the cache, pipeline triggers)"
    )
    ok = c >= 20_000 and c / b >= 0.4
    print(
        f"ratio cache path/bare: {c / b:.2f}; targets (>= 20,000 events/s and >= 0.4 of bare) through gateway, cache and pipeline triggers: {'met' if ok else 'NOT met'}"
    )
    return 0


# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "part",
        nargs="?",
        default="all",
        choices=("all", "latency", "one-pod", "memory", "memory-http", "watch"),
    )
    ap.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    g = ap.add_argument_group("latency")
    g.add_argument("--rate", type=float, default=1000.0, help="FailedScheduling events per second")
    g.add_argument("--seconds", type=float, default=10.0)
    g.add_argument(
        "--stuck-workloads", type=int, default=200, help="workloads becoming unschedulable during the run"
    )
    g.add_argument(
        "--repeat-share",
        type=float,
        default=0.5,
        help="share of events that repeat one for a pod already pending",
    )
    g.add_argument("--debounce", type=float, default=0.05, help="PipelineConfig.debounce (seconds)")
    g.add_argument("--cluster-nodes", type=int, default=50, help="nodes of the served cluster")
    g.add_argument("--cluster-pods", type=int, default=1000, help="running pods of the served cluster")
    g.add_argument(
        "--one-pod-samples", type=int, default=12, help="one-changed-pod analyses timed after the load"
    )
    g.add_argument("--profile", action="store_true", help="one-pod: cProfile the samples (top 25)")
    g.add_argument(
        "--drain", type=float, default=30.0, help="seconds to wait for the last incidents after the load"
    )
    g = ap.add_argument_group("memory")
    g.add_argument("--nodes", type=int, default=5000)
    g.add_argument("--pods", type=int, default=150_000)
    g.add_argument("--workloads", type=int, default=100, help="workloads of the generated cluster")
    g.add_argument(
        "--via-watch",
        type=int,
        default=30_000,
        metavar="PODS",
        help="also load this many pods through FakeCluster + Gateway over HTTP (0: skip)",
    )
    g.add_argument("--no-analysis", action="store_true", help="skip the analysis pass after loading")
    g.add_argument(
        "--no-metrics",
        action="store_true",
        help="skip applying NodeMetrics/PodMetrics for every node and pod",
    )
    g = ap.add_argument_group("watch")
    g.add_argument("--watch-events", type=int, default=60_000)
    g.add_argument("--watch-repeat", type=int, default=2)
    args = ap.parse_args(argv)
    if args.part == "memory-http":
        return run_memory_http(args)
    if args.part == "all":
        rc = 0
        for part in ("latency", "memory", "watch"):
            print(f"=== {part} ===", flush=True)
            cmd = [
                sys.executable,
                __file__,
                part,
                *[a for a in (argv if argv is not None else sys.argv[1:]) if a != "all"],
            ]
            rc |= subprocess.run(cmd, check=False).returncode
        return rc
    if args.part == "latency":
        return run_latency(args)
    if args.part == "one-pod":
        return run_one_pod(args)
    if args.part == "memory":
        return run_memory(args)
    return run_watch(args)


if __name__ == "__main__":
    raise SystemExit(main())
