"""Refusals nobody wrote for us: every kubectl drain wording since 1.5 (and oc adm drain's),
Karpenter's disruption blockers and provisioning reasons holding JSON, and the pod named
by any eviction wrapper. Messages are rebuilt from the upstream format strings (cited per
table row) and from pastes in public issues."""

from __future__ import annotations

import itertools

import pytest

from analyzers.messages import (
    AUTOSCALER,
    DISRUPTION_BLOCKED,
    DRAIN_REFUSED,
    EVICTION,
    PDB_VIOLATION,
    parse_message_uncached,
)

# (release range, fatal message constant, flag): the drain filters' fatal messages.
_FATALS_OLD = [
    # an earlier pkg/kubectl/cmd/drain.go kUnmanagedFatal (before StatefulSet joined the list)
    (
        "pods not managed by ReplicationController, ReplicaSet, Job, or DaemonSet (use --force to override)",
        "--force",
    ),
    # kubernetes v1.5.8-v1.14 pkg/kubectl/cmd/drain.go, pkg/kubectl/cmd/drain/drain.go
    (
        "pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet (use --force to override)",
        "--force",
    ),
    ("DaemonSet-managed pods (use --ignore-daemonsets to ignore)", "--ignore-daemonsets"),
    ("pods with local storage (use --delete-local-data to override)", "--delete-local-data"),
]
_FATALS_NEW = [
    # k8s.io/kubectl v0.17.0-v0.18.0 pkg/drain/filters.go
    (
        "Pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet (use --force to override)",
        "--force",
    ),
    ("Pods with local storage (use --delete-local-data to override)", "--delete-local-data"),
    # k8s.io/kubectl v0.20.0-v0.37.2 pkg/drain/filters.go
    ("Pods with local storage (use --delete-emptydir-data to override)", "--delete-emptydir-data"),
    ("DaemonSet-managed Pods (use --ignore-daemonsets to ignore)", "--ignore-daemonsets"),
    ("Pods that declare no controller (use --force to override)", "--force"),
]


def old_message(kinds: list[tuple[str, list[str]]]) -> str:
    """v1.5-v1.14 podStatuses.Message(): "<fatal>: <pod>, <pod>" joined with "; " (bare pod names)."""
    return "; ".join(f"{fatal}: {', '.join(pods)}" for fatal, pods in kinds)


def new_error(kinds: list[tuple[str, list[str]]]) -> str:
    """v0.17+ errors(): "cannot delete <fatal>: ns/pod, ns/pod" per kind, aggregated "[a, b]"."""
    errs = [f"cannot delete {fatal}: {', '.join(pods)}" for fatal, pods in kinds]
    return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"


_POD_SETS = [
    ["hr-app"],
    ["kube-proxy-7xjpl", "fluentd-x2k9q"],
    ["cassandra-0", "cassandra-1", "web-5d8f7-abcde"],
]


@pytest.mark.parametrize("combo", [c for r in (1, 2, 3) for c in itertools.combinations(range(1, 4), r)])
def test_old_drain_refusals_in_one_line(combo: tuple[int, ...]) -> None:
    kinds = [(_FATALS_OLD[i][0], _POD_SETS[n % 3]) for n, i in enumerate(combo)]
    text = (
        'error: unable to drain node "node-3", aborting command...\n\nThere are pending nodes to be drained:\n'
        f" node-3\nerror: {old_message(kinds)}\n"
    )
    parsed = parse_message_uncached(text)
    assert parsed.kind == EVICTION and parsed.eviction is not None
    ev = parsed.eviction
    assert ev.kind == DRAIN_REFUSED
    assert [(flag, list(pods)) for _, flag, pods in ev.refusals] == [
        (_FATALS_OLD[i][1], _POD_SETS[n % 3]) for n, i in enumerate(combo)
    ]


@pytest.mark.parametrize(("fatal", "flag"), _FATALS_OLD[:1])
def test_the_wording_before_statefulsets(fatal: str, flag: str) -> None:
    ev = parse_message_uncached(f"error: {fatal}: etcd-0002").eviction
    assert ev is not None and ev.refusals == ((fatal.split(" (use")[0], flag, ("etcd-0002",)),)
    assert ev.pod == "etcd-0002" and ev.namespace is None


@pytest.mark.parametrize("combo", [c for r in (1, 2, 3) for c in itertools.combinations(range(5), r)])
def test_new_drain_refusals_aggregated(combo: tuple[int, ...]) -> None:
    kinds = [(_FATALS_NEW[i][0], [f"ns{n}/{p}" for p in _POD_SETS[n % 3]]) for n, i in enumerate(combo)]
    error = new_error(kinds)
    text = f'error: unable to drain node "n1" due to error: {error}, continuing command...\nThere are pending nodes to be drained:\n n1\n{error}'
    ev = parse_message_uncached(text).eviction
    assert ev is not None and ev.kind == DRAIN_REFUSED
    want: dict[tuple[str, str], list[str]] = {}
    for fatal, pods in kinds:
        key = (" ".join(fatal.split(" (use")[0].split()), fatal.split("(use ")[1].split(" ")[0])
        want.setdefault(key, []).extend(pods)
    assert {(what, flag): list(pods) for what, flag, pods in ev.refusals} == want


def test_real_paste_pharos_host_upgrades_2018() -> None:
    # kontena/pharos-host-upgrades#26 (kubectl 1.10)
    text = (
        "2018/06/18 12:33:05 Upgrade failed, releasing kube lock... (Failed to drain kube node for host reboot: "
        "Failed to drain node terom-pharos-worker1: kubectl drain --ignore-daemonsets --force terom-pharos-worker1: "
        'exit status 1: error: unable to drain node "terom-pharos-worker1", aborting command...\n\nThere are pending '
        "nodes to be drained:\n terom-pharos-worker1\nerror: pods with local storage (use --delete-local-data to "
        "override): kubernetes-dashboard-598d75cb96-2nnql\n)"
    )
    ev = parse_message_uncached(text).eviction
    assert ev is not None and ev.kind == DRAIN_REFUSED
    assert ev.refusals == (
        ("pods with local storage", "--delete-local-data", ("kubernetes-dashboard-598d75cb96-2nnql",)),
    )


# kubernetes-sigs/karpenter: (release, cause as the code prints it, blocker)
_KARPENTER_BLOCKED = [
    (
        "v0.32.0 types.go",
        "Cannot disrupt Node: state node doesn't contain both a node and a nodeclaim",
        "no-node-or-nodeclaim",
    ),
    ("v0.35.0 types.go", "Cannot disrupt NodeClaim: state node is nominated for a pending pod", "nominated"),
    ("v0.31 events.go", "Cannot deprovision Machine: state node isn't initialized", "not-initialized"),
    (
        "v0.37.0 types.go",
        "Cannot disrupt Node: candidate is already being deprovisioned",
        "already-disrupting",
    ),
    ("v1.0.0 statenode.go", "Cannot disrupt Node: state node is marked for deletion", "deleting"),
    ("v1.3.0 statenode.go", "Node is nominated for a pending pod.", "nominated"),
    ("v1.3.0 statenode.go", "Nodeclaim does not have an associated node.", "no-node-or-nodeclaim"),
    ("v1.3.0 statenode.go", 'Node doesn\'t have required label "karpenter.sh/nodepool".', "not-managed"),
    ("v1.3.0 types.go", 'NodePool "gpu" not found', "nodepool-missing"),
    (
        "v1.3.0 events.go",
        "No allowed disruptions for disruption reason Underutilized due to blocking budget",
        "budget",
    ),
    ("v1.3.0 events.go", "No allowed disruptions due to blocking budget", "budget"),
    ("v1.3.0 consolidation.go", "Can't replace with a cheaper node", "unconsolidatable"),
    (
        "v1.3.0 consolidation.go",
        "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node",
        "unconsolidatable",
    ),
]


@pytest.mark.parametrize(
    ("release", "text", "blocker"), _KARPENTER_BLOCKED, ids=[r[0] for r in _KARPENTER_BLOCKED]
)
def test_karpenter_disruption_blocked(release: str, text: str, blocker: str) -> None:
    parsed = parse_message_uncached(f"Normal   DisruptionBlocked  2m (x12 over 40m)  karpenter  {text}")
    assert parsed.kind == EVICTION and parsed.eviction is not None
    assert (parsed.eviction.kind, parsed.eviction.blocker) == (DISRUPTION_BLOCKED, blocker)
    assert parsed.eviction.detail and text.rstrip(".") in parsed.eviction.detail + "."


def test_karpenter_pdb_cause_stays_a_pdb_violation() -> None:
    ev = parse_message_uncached('Cannot disrupt Node: pdb "shop/web" prevents pod evictions').eviction
    assert ev is not None and ev.kind == PDB_VIOLATION and ev.pdb == "web"


@pytest.mark.parametrize("word", ["provisioner", "nodepool"])
def test_karpenter_reason_with_json_is_whole_and_pre_v032_provisioner_reads_like_nodepool(word: str) -> None:
    reason = 'no instance type satisfied resources {"cpu":"29500m","memory":"60Gi","pods":"1"} and requirements karpenter.sh/capacity-type In [on-demand]'
    event = f'Failed to schedule pod, incompatible with {word} "default", daemonset overhead={{"cpu":"200m","pods":"2"}}, {reason}'
    log = (
        '{"level":"ERROR","time":"2023-09-01T10:00:00Z","logger":"controller.provisioner","message":"Could not schedule pod, incompatible with '
        + word
        + ' \\"default\\", '
        + reason.replace('"', '\\"')
        + '","commit":"5a2fe84","pod":"ml/train-0"}'
    )
    for text in (event, log):
        parsed = parse_message_uncached(text)
        assert parsed.kind == AUTOSCALER
        [got] = parsed.reasons
        assert got.text == reason
        assert (got.count, got.info.object_name, got.code) == (1, "default", "autoscaler-no-instance-type")


# Eviction wrappers that name the pod (chaos tools, operators, autoscalers, descheduler).
_WRAPPERS = [
    ("evicting pod shop/web-1 failed: {api}", "shop", "web-1"),
    ("evicting pod web-1 failed: {api}", None, "web-1"),
    (
        'Failed to evict pod web-1: {{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"{api}","reason":"TooManyRequests","code":429}}',
        None,
        "web-1",
    ),
    ("failed to evict pod shop/web-1 within allowed timeout (last error: {api})", "shop", "web-1"),
    (
        'E0101 00:00:00.000000 1 evictions.go:99] "Error evicting pod" err="{api}" pod="shop/web-1" reason=""',
        "shop",
        "web-1",
    ),
    ("error evicting pod 'web-1': {api}", None, "web-1"),
    ("Eviction of pod shop/web-1 failed: {api}", "shop", "web-1"),
]


@pytest.mark.parametrize(("template", "namespace", "pod"), _WRAPPERS)
def test_eviction_wrappers_name_the_pod(template: str, namespace: str | None, pod: str) -> None:
    api = "Cannot evict pod as it would violate the pod's disruption budget."
    ev = parse_message_uncached(template.format(api=api)).eviction
    assert ev is not None and ev.kind == PDB_VIOLATION
    assert (ev.namespace, ev.pod) == (namespace, pod)


def test_the_api_sentence_alone_names_no_pod() -> None:
    ev = parse_message_uncached("Cannot evict pod as it would violate the pod's disruption budget.").eviction
    assert ev is not None and ev.pod is None
