"""Eviction and drain failures: pkg/registry/core/pod/storage/eviction.go (the API),
staging/src/k8s.io/kubectl/pkg/drain/drain.go (kubectl drain, old and new wrappers)."""

from __future__ import annotations

import pytest

from analyzers.messages import EVICTION, MULTIPLE_PDBS, PDB_VIOLATION, parse_eviction, parse_message_uncached
from analyzers.messages.eviction import DRAIN_REFUSED, NODE_PRESSURE, OTHER, Eviction
from analyzers.messages.text import clean

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def evict(text: str) -> Eviction:
    parsed = parse_message_uncached(text)
    assert parsed.kind == EVICTION
    assert parsed.reasons == () and parsed.total_nodes is None and parsed.preemption is None
    assert parsed.eviction is not None
    return parsed.eviction


def test_api_429_text_alone() -> None:
    ev = evict(VIOLATION)
    assert (ev.kind, ev.pod, ev.namespace, ev.pdb) == (PDB_VIOLATION, None, None, None)
    assert ev.detail == "Cannot evict pod as it would violate the pod's disruption budget"
    assert ev.will_retry is False


def test_kubectl_drain_wrapper_with_namespace() -> None:
    ev = evict(f'error when evicting pods/"web-0" -n "shop" (will retry after 5s): {VIOLATION}')
    assert (ev.kind, ev.pod, ev.namespace) == (PDB_VIOLATION, "web-0", "shop")
    assert ev.will_retry is True


def test_old_kubectl_wrapper_without_namespace() -> None:
    ev = evict(f'error when evicting pod "web-0" (will retry after 5s): {VIOLATION}')
    assert (ev.kind, ev.pod, ev.namespace, ev.will_retry) == (PDB_VIOLATION, "web-0", None, True)


def test_drain_output_with_evicting_lines() -> None:
    ev = evict(
        "node/worker-2 cordoned\n"
        "evicting pod shop/web-0\n"
        f'error when evicting pods/"web-0" -n "shop" (will retry after 5s): {VIOLATION}\n'
        "evicting pod shop/web-0\n"
    )
    assert (ev.kind, ev.pod, ev.namespace, ev.will_retry) == (PDB_VIOLATION, "web-0", "shop", True)
    assert ev.detail == "Cannot evict pod as it would violate the pod's disruption budget"


def test_old_drain_output_names_the_pod_only() -> None:
    ev = evict(f'evicting pod "web-0"\nerror when evicting pod "web-0" (will retry after 5s): {VIOLATION}')
    assert (ev.pod, ev.namespace) == ("web-0", None)


def test_evicting_line_alone_is_other() -> None:
    ev = evict("evicting pod shop/web-0")
    assert (ev.kind, ev.pod, ev.namespace) == (OTHER, "web-0", "shop")


def test_api_cause_gives_pdb_and_numbers() -> None:
    ev = evict("The disruption budget web-pdb needs 2 healthy pods and has 2 currently")
    assert (ev.kind, ev.pdb, ev.desired_healthy, ev.current_healthy) == (PDB_VIOLATION, "web-pdb", 2, 2)
    assert ev.detail == "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"


def test_wrapper_and_cause_together() -> None:
    ev = evict(
        f'error when evicting pods/"cassandra-1" -n "db" (will retry after 5s): {VIOLATION} '
        "The disruption budget cassandra.pdb needs 3 healthy pods and has 3 currently"
    )
    assert (ev.pod, ev.namespace, ev.pdb, ev.desired_healthy, ev.current_healthy) == (
        "cassandra-1",
        "db",
        "cassandra.pdb",
        3,
        3,
    )


def test_pdb_that_failed_sync() -> None:
    ev = evict(
        "The disruption budget web-pdb does not allow evicting pods currently because it failed sync: "
        "found no controllers for pod web-0"
    )
    assert (ev.kind, ev.pdb) == (PDB_VIOLATION, "web-pdb")


@pytest.mark.parametrize(
    ("text", "pod", "namespace"),
    [
        (
            'error when evicting pods/"chi-ch-ebs-mainebs-0-1-0" -n "clickhouse": This pod has more than one '
            "PodDisruptionBudget, which the eviction subresource does not support.",
            "chi-ch-ebs-mainebs-0-1-0",
            "clickhouse",
        ),
        (
            'error: error when evicting pod "nginx-5894696d4-fprjv": This pod has more than one PodDisruptionBudget,\n'
            "which the eviction subresource does not support.",
            "nginx-5894696d4-fprjv",
            None,
        ),
        (
            "Error from server: This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
            None,
            None,
        ),
    ],
)
def test_multiple_pdbs(text: str, pod: str | None, namespace: str | None) -> None:
    ev = evict(text)
    assert (ev.kind, ev.pod, ev.namespace, ev.will_retry) == (MULTIPLE_PDBS, pod, namespace, False)


def test_global_timeout_is_other() -> None:
    ev = evict('error when evicting pods/"web-0" -n "shop": global timeout reached: 1m0s')
    assert (ev.kind, ev.pod, ev.namespace) == (OTHER, "web-0", "shop")
    assert ev.detail == "global timeout reached: 1m0s"


def test_cluster_autoscaler_and_karpenter() -> None:
    ca = evict("not enough pod disruption budget to move shop/web-0")
    assert (ca.kind, ca.pod, ca.namespace) == (PDB_VIOLATION, "web-0", "shop")
    karpenter = evict('Cannot disrupt Node: pdb "shop/web-pdb" prevents pod evictions')
    assert (karpenter.kind, karpenter.namespace, karpenter.pdb) == (PDB_VIOLATION, "shop", "web-pdb")


def test_kubelet_node_pressure_eviction_is_recognised() -> None:
    ev = evict("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.")
    assert (ev.kind, ev.resource, ev.pdb) == (NODE_PRESSURE, "memory", None)
    assert ev.detail == "The node was low on resource: memory"


def test_not_an_eviction() -> None:
    assert parse_eviction("Back-off restarting failed container") is None


# k8s.io/kubectl v0.35.4 pkg/drain/filters.go: the fatal filter messages, and errors() wording
# ("cannot delete %s: %s"; unmanagedFatal already begins with "cannot delete").
_DRAIN_FATAL = [
    ("cannot delete Pods that declare no controller (use --force to override)", "--force"),
    ("DaemonSet-managed Pods (use --ignore-daemonsets to ignore)", "--ignore-daemonsets"),
    ("Pods with local storage (use --delete-emptydir-data to override)", "--delete-emptydir-data"),
    ("pods with local storage (use --delete-local-data to override)", "--delete-local-data"),  # before 1.20
    (
        "pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet (use --force to override)",
        "--force",
    ),  # kubectl before 1.19
]


@pytest.mark.parametrize(("fatal", "flag"), _DRAIN_FATAL)
@pytest.mark.parametrize(
    "pods", [["default/hr-app"], ["kube-system/kindnet-dmj46", "kube-system/kube-proxy-7xjpl"]]
)
def test_kubectl_drains_refusal_to_start_names_each_kind_its_flag_and_pods(
    fatal: str, flag: str, pods: list[str]
) -> None:
    error = f"cannot delete {fatal}: {', '.join(pods)}"
    text = (
        f'node/node01 cordoned\nerror: unable to drain node "node01" due to error: {error}, continuing command...\n'
        f"There are pending nodes to be drained:\n node01\n{error}"
    )
    ev = parse_eviction(clean(text))
    assert ev is not None and ev.kind == DRAIN_REFUSED
    [(what, got_flag, got_pods)] = ev.refusals
    assert (got_flag, list(got_pods)) == (flag, pods)
    assert what.lower().startswith(("pods", "daemonset")) and "cannot delete" not in what
    assert (ev.namespace, ev.pod) == (
        (pods[0].split("/")[0], pods[0].split("/")[1]) if len(pods) == 1 else (None, None)
    )


def test_an_aggregated_refusal_keeps_every_kind() -> None:
    text = (
        'error: unable to drain node "kind-worker" due to error: [cannot delete DaemonSet-managed Pods (use '
        "--ignore-daemonsets to ignore): kube-system/kindnet-dmj46, kube-system/kube-proxy-7xjpl, cannot delete "
        "Pods with local storage (use --delete-emptydir-data to override): default/cargo-2], continuing command..."
    )
    ev = parse_eviction(clean(text))
    assert ev is not None
    assert [(flag, pods) for _, flag, pods in ev.refusals] == [
        ("--ignore-daemonsets", ("kube-system/kindnet-dmj46", "kube-system/kube-proxy-7xjpl")),
        ("--delete-emptydir-data", ("default/cargo-2",)),
    ]


# pkg/registry/core/pod/storage/eviction_test.go (v1.35.4): the eviction API's errors as
# the client prints them ("<message>: TooManyRequests: <cause>").
_API = "Cannot evict pod as it would violate the pod's disruption budget.: TooManyRequests: "


@pytest.mark.parametrize(
    ("cause", "desired", "current", "sync_failed", "detail"),
    [
        ("The disruption budget foo needs 0 healthy pods and has 0 currently", 0, 0, False, None),
        ("The disruption budget foo needs 3 healthy pods and has 3 currently", 3, 3, False, None),
        ("The disruption budget foo is still being processed by the server.", None, None, False, None),
        (
            "The disruption budget foo does not allow evicting pods currently because it failed sync: hoge",
            None,
            None,
            True,
            None,
        ),
        (
            "The disruption budget foo does not allow evicting pods currently (bar-reason): hoge",
            None,
            None,
            False,
            "The disruption budget foo does not allow evicting pods currently (bar-reason): hoge",
        ),
    ],
)
def test_the_eviction_apis_own_table(
    cause: str, desired: int | None, current: int | None, sync_failed: bool, detail: str | None
) -> None:
    ev = parse_eviction(clean(_API + cause))
    assert ev is not None
    assert (ev.kind, ev.pdb, ev.desired_healthy, ev.current_healthy, ev.sync_failed) == (
        PDB_VIOLATION,
        "foo",
        desired,
        current,
        sync_failed,
    )
    assert ev.detail == (detail or cause.rstrip("."))
