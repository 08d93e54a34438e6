"""A small, known incident history for the API, page and CLI tests (written through the real tracker)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import ObjectRef, Remedy, RemedyKind, Severity
from storage.tracker import track
from tests.storage.factories import GPU_YAML, MESSAGE, T0, finding, trigger

NOW = T0 + timedelta(days=3)

PDB_YAML = """apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: cassandra
  namespace: data
spec:
  maxUnavailable: 1
"""


async def seed(sessions: async_sessionmaker[AsyncSession]) -> None:
    """Incidents, in id order:

    1. ml/trainer rollout-deadlock, critical, open, 3 events, 2 remedies (YAML + command)
    2. data/cassandra pdb-blocks-drain, warning, resolved after 2 h
    3. web/frontend insufficient-resources (cpu), warning, open; title has markup to escape
    4. data/cassandra pdb-blocks-drain again (recurrence of 2), open
    5..24. batch/job-N insufficient-resources (memory), info, resolved after N minutes
    """
    trainer = finding(
        pods=("ml/trainer-7d9-abc",),
        remedies=(
            Remedy(
                "Let the old pod go first (maxSurge 0, maxUnavailable 1)",
                RemedyKind.PATCH,
                ObjectRef("Deployment", "ml", "trainer"),
                GPU_YAML,
                "kubectl -n ml patch deployment trainer --patch-file fix.yaml",
                True,
                "re-simulated: the new pod fits on gpu-node-1 once the old pod is gone",
            ),
            Remedy(
                "Or recreate instead of rolling",
                RemedyKind.COMMAND,
                None,
                "",
                'kubectl -n ml patch deployment trainer -p \'{"spec":{"strategy":{"type":"Recreate"}}}\'',
                False,
                "",
            ),
        ),
        evidence={
            "gpus_free": 0,
            "nodes": 10,
            "max_surge": 1,
            "max_unavailable": 0,
            "node": {"name": "gpu-node-1", "allocatable": {"nvidia.com/gpu": 1}},
        },
    )
    cassandra = ObjectRef("StatefulSet", "data", "cassandra")
    pdb = finding(
        cassandra,
        rule_id="pdb-blocks-drain",
        severity=Severity.WARNING,
        title="Drain of node-3 blocked by PodDisruptionBudget data/cassandra (minAvailable 2 of 3)",
        explanation="minAvailable 2 of 3 replicas leaves 1 disruption, already used.",
        remedies=(
            Remedy(
                "Allow one disruption",
                RemedyKind.MANIFEST,
                cassandra,
                PDB_YAML,
                "kubectl apply -f pdb.yaml",
                True,
                "re-simulated: eviction allowed",
            ),
        ),
    )
    frontend = finding(
        ObjectRef("Deployment", "web", "frontend"),
        rule_id="insufficient-resources",
        cause="cpu",
        severity=Severity.WARNING,
        title="<script>alert(1)</script> needs 4 cpu; the largest node has 2 free",
        explanation="Requests decide fit: 4 cpu requested, at most 2 allocatable free.",
        remedies=(),
    )
    await track(
        sessions, cluster="prod", findings=[trainer], now=T0, triggers=[trigger("tr", 1)], sinks=["slack"]
    )
    await track(
        sessions,
        cluster="prod",
        findings=[pdb],
        now=T0 + timedelta(minutes=1),
        triggers=[trigger("pdb", 1, "Cannot evict pod as it would violate the pod's disruption budget.")],
    )
    await track(
        sessions,
        cluster="prod",
        findings=[trainer],
        now=T0 + timedelta(minutes=5),
        triggers=[trigger("tr", 2)],
    )
    await track(
        sessions,
        cluster="prod",
        findings=[frontend],
        now=T0 + timedelta(hours=1),
        triggers=[trigger("fe", 1)],
    )
    await track(
        sessions,
        cluster="prod",
        findings=[],
        evaluated=[cassandra],
        now=T0 + timedelta(hours=2, minutes=1),
        triggers=[trigger("ok", 1, "Successfully assigned data/cassandra-2 to node-4")],
    )
    await track(
        sessions,
        cluster="prod",
        findings=[trainer],
        now=T0 + timedelta(hours=3),
        triggers=[trigger("tr", 3, MESSAGE)],
    )
    await track(
        sessions,
        cluster="prod",
        findings=[pdb],
        now=T0 + timedelta(days=1),
        triggers=[trigger("pdb2", 1, "Cannot evict pod as it would violate the pod's disruption budget.")],
    )
    for n in range(1, 21):
        job = finding(
            ObjectRef("Job", "batch", f"job-{n}"),
            rule_id="insufficient-resources",
            cause="memory",
            severity=Severity.INFO,
            title=f"job-{n} needs 64Gi memory",
            explanation="plain words",
            remedies=(),
        )
        start = T0 + timedelta(days=1, hours=n)
        await track(sessions, cluster="prod", findings=[job], now=start, triggers=[trigger(f"job{n}")])
        await track(
            sessions, cluster="prod", findings=[], evaluated=[job.subject], now=start + timedelta(minutes=n)
        )


SCALE_UP_MESSAGE = "pod triggered scale-up: [{gpu-pool 1->2 (max: 4)}]"


async def seed_waiting(sessions: async_sessionmaker[AsyncSession]) -> tuple[int, int]:
    """Two more incidents, written through the real tracker with the waiting state; returns their ids:

    * ml/inference insufficient-resources (nvidia.com/gpu), open, waiting for scale-up since NOW - 20 min
    * batch/render insufficient-resources (nvidia.com/gpu), resolved while waiting (NOW - 2 h → NOW - 1 h 40)
    """
    inference = finding(
        ObjectRef("Deployment", "ml", "inference"),
        rule_id="insufficient-resources",
        cause="nvidia.com/gpu",
        title="inference needs 1 nvidia.com/gpu; no node has one free",
        pods=("ml/inference-5f6-abc",),
        remedies=(),
    )
    render = finding(
        ObjectRef("Job", "batch", "render"),
        rule_id="insufficient-resources",
        cause="nvidia.com/gpu",
        title="render needs 1 nvidia.com/gpu; no node has one free",
        pods=("batch/render-xyz",),
        remedies=(),
    )
    waiting = {inference.fingerprint: "scale-up", render.fingerprint: "scale-up"}
    first = await track(
        sessions,
        cluster="prod",
        findings=[render],
        now=NOW - timedelta(hours=2),
        triggers=[trigger("ca-render", 1, SCALE_UP_MESSAGE, pod="batch/render-xyz")],
        waiting=waiting,
        sinks=["slack"],
    )
    await track(
        sessions,
        cluster="prod",
        findings=[],
        evaluated=[render.subject],
        now=NOW - timedelta(hours=1, minutes=40),
        triggers=[trigger("ok-render", 1, "Successfully assigned batch/render-xyz to gpu-node-3")],
        sinks=["slack"],
    )
    r = await track(
        sessions,
        cluster="prod",
        findings=[inference],
        now=NOW - timedelta(minutes=20),
        triggers=[trigger("ca-inference", 1, SCALE_UP_MESSAGE, pod="ml/inference-5f6-abc")],
        waiting=waiting,
        sinks=["slack"],
    )
    return r.opened[0], first.opened[0]
