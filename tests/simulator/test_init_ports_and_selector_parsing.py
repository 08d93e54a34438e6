"""NodePorts and init containers; selectors labels.NewRequirement refuses.

- pkg/scheduler/util/utils.go GetHostPorts (v1.34.2): only restartable init
  containers (sidecars) contribute host ports, for the incoming pod and for the
  pods already on a node (NodeInfo.UsedPorts uses the same function).
- component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go (v0.34.2): a
  required node-affinity term that does not parse matches nothing; the other
  terms still count.
- interpodaffinity/filtering.go PreFilter: an (anti-)affinity selector that does
  not parse rejects the pod as a whole with ``parsing pod: ...``; the expected
  texts are printed by apimachinery v0.34.2 itself (upstream/labelerrors/main.go).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot
from tests.simulator.test_filters_node import affinity, expr

UNRES = "UnschedulableAndUnresolvable"
PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"


def run(objs: list[dict[str, Any]], name: str = "p", version: str | None = None):  # type: ignore[no-untyped-def]
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, name), kube_version=version)


def with_init(obj: dict[str, Any], port: int, *, sidecar: bool) -> dict[str, Any]:
    init: dict[str, Any] = {
        "name": "init",
        "image": "registry.example/init:1",
        "ports": [{"containerPort": port, "hostPort": port, "protocol": "TCP"}],
    }
    if sidecar:
        init["restartPolicy"] = "Always"
    obj["spec"]["initContainers"] = [init]
    return obj


@pytest.mark.parametrize("sidecar", [False, True])
def test_host_port_of_an_init_container_counts_only_for_a_sidecar_incoming(sidecar: bool) -> None:
    used = {"containerPort": 80, "hostPort": 80, "protocol": "TCP"}
    v = run(
        [node("a"), pod("old", node_name="a", host_ports=[used]), with_init(pod("p"), 80, sidecar=sidecar)]
    )
    assert v.fits is (not sidecar)
    if sidecar:
        assert v.node("a").filters[0].reasons == (PORTS_REASON,)


@pytest.mark.parametrize("sidecar", [False, True])
def test_host_port_of_an_init_container_counts_only_for_a_sidecar_existing(sidecar: bool) -> None:
    wanted = {"containerPort": 80, "hostPort": 80, "protocol": "TCP"}
    old = with_init(pod("old", node_name="a"), 80, sidecar=sidecar)
    v = run([node("a"), old, pod("p", host_ports=[wanted])])
    assert v.fits is (not sidecar)


# --- node affinity: a term that does not parse matches nothing --------------------------


NODES = [
    node("a", labels={"zone": "z1", "gen": "3"}),
    node("b", labels={"zone": "z2", "gen": "5"}),
]


@pytest.mark.parametrize(
    "bad",
    [
        expr("zone", "NotIn", "not a value"),  # space: not a label value
        expr("zone", "NotIn", "-z3"),  # must start with an alphanumeric
        expr("zone", "NotIn", "z" * 64),  # longer than 63
        expr("zone", "NotIn"),  # In/NotIn need values
        expr("zone", "Exists", "z1"),  # Exists takes none
        expr("gen", "Gt", "1", "2"),  # exactly one value
        expr("gen", "Gt", "two"),  # an integer
        expr("gen", "Gt", "-1"),  # an integer, but not a label value
        expr("gen", "Gt", "9223372036854775808"),  # outside int64
        expr("bad key", "Exists"),
        expr("Zone.Example/zone", "Exists"),  # prefix must be a lowercase DNS subdomain
        expr("zone", "Matches", "z1"),
    ],
)
def test_a_node_affinity_term_that_does_not_parse_matches_nothing(bad: dict[str, Any]) -> None:
    # Without the bad expression the term matches both nodes; with it, none.
    good = expr("gen", "Exists")
    assert run([*NODES, pod("p", affinity=affinity({"matchExpressions": [good]}))]).feasible_nodes == 2
    v = run([*NODES, pod("p", affinity=affinity({"matchExpressions": [good, bad]}))])
    assert v.feasible_nodes == 0
    assert v.prefilter is None
    assert {f.filters[0].reasons for f in v.nodes} == {("node(s) didn't match Pod's node affinity/selector",)}


def test_the_other_terms_still_match_when_one_does_not_parse() -> None:
    bad = {"matchExpressions": [expr("zone", "In", "z 1")]}
    ok = {"matchExpressions": [expr("zone", "In", "z2")]}
    v = run([*NODES, pod("p", affinity=affinity(bad, ok))])
    assert {n.node for n in v.nodes if n.fits} == {"b"}


def test_match_fields_need_exactly_one_value() -> None:
    two = {"matchFields": [expr("metadata.name", "NotIn", "a", "b")]}
    assert run([*NODES, pod("p", affinity=affinity(two))]).feasible_nodes == 0
    one = {"matchFields": [expr("metadata.name", "NotIn", "a")]}
    assert {n.node for n in run([*NODES, pod("p", affinity=affinity(one))]).nodes if n.fits} == {"b"}


def test_gt_at_the_threshold_does_not_match_and_one_above_does() -> None:
    """Requirement.Matches: ``lsValue > rValue`` -- strictly greater."""
    v = run([*NODES, pod("p", affinity=affinity({"matchExpressions": [expr("gen", "Gt", "5")]}))])
    assert v.feasible_nodes == 0
    v = run([*NODES, pod("p", affinity=affinity({"matchExpressions": [expr("gen", "Gt", "4")]}))])
    assert {n.node for n in v.nodes if n.fits} == {"b"}
    v = run([*NODES, pod("p", affinity=affinity({"matchExpressions": [expr("gen", "Gt", "3")]}))])
    assert {n.node for n in v.nodes if n.fits} == {"b"}


def test_a_node_label_outside_int64_never_compares() -> None:
    big = node("c", labels={"gen": "99999999999999999999"})
    v = run([*NODES, big, pod("p", affinity=affinity({"matchExpressions": [expr("gen", "Gt", "4")]}))])
    assert {n.node for n in v.nodes if n.fits} == {"b"}


# --- inter-pod (anti-)affinity: a selector that does not parse is a PreFilter rejection ---

UPSTREAM = Path(__file__).parent / "upstream" / "labelerrors" / "expected.tsv"

# The selectors of upstream/labelerrors/main.go, in the API's JSON.
SELECTORS: dict[str, dict[str, Any]] = {
    "space": {"matchExpressions": [expr("app", "In", "web server")]},
    "long": {"matchExpressions": [expr("app", "In", "a" * 74)]},
    "badkey": {"matchExpressions": [expr("-app", "Exists")]},
    "twovals": {"matchExpressions": [expr("app", "In", "a b", "-c")]},
    "matchlabels": {"matchLabels": {"app": "web/1"}},
    "emptyin": {"matchExpressions": [expr("app", "In")]},
    "prefix": {"matchExpressions": [expr("Example.com/app", "Exists")]},
    "slashes": {"matchExpressions": [expr("a/b/c", "Exists")]},
    "emptyname": {"matchExpressions": [expr("example.com/", "Exists")]},
    "emptyprefix": {"matchExpressions": [expr("/app", "Exists")]},
    "longbad": {"matchExpressions": [expr("app", "In", "-" + "a" * 74)]},
    "existsvals": {"matchExpressions": [expr("app", "Exists", "x")]},
    "keyandval": {"matchExpressions": [expr("a b", "In", "x y")]},
    "unicode": {"matchExpressions": [expr("app", "In", 'café\t"q"')]},
    "longkey": {"matchExpressions": [expr("a" * 70, "Exists")]},
    "badop": {"matchExpressions": [expr("app", "Gt", "1")]},
}


def upstream_messages() -> list[tuple[str, str]]:
    rows = [line.split("\t", 1) for line in UPSTREAM.read_text(encoding="utf-8").splitlines() if line]
    return [(name, message) for name, message in rows]


def test_every_upstream_case_has_its_selector() -> None:
    assert [name for name, _ in upstream_messages()] == list(SELECTORS)


@pytest.mark.parametrize(("case", "message"), upstream_messages())
def test_anti_affinity_selector_that_does_not_parse_is_rejected_with_the_scheduler_words(
    case: str, message: str
) -> None:
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": SELECTORS[case]}
    incoming = pod(
        "p", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    )
    v = run([*NODES, incoming], version="1.33")
    assert v.prefilter is not None
    assert (v.prefilter.plugin, v.prefilter.code, v.prefilter.reasons) == (
        "InterPodAffinity",
        UNRES,
        (message,),
    )
    assert v.message.startswith(f"0/2 nodes are available: {message}. preemption: 0/2 nodes are available:")
    assert not v.preemption.candidates


@pytest.mark.parametrize(
    ("field", "label"),
    [
        ("podAffinity", "requiredAffinityTerms"),
        ("podAntiAffinity", "requiredAntiAffinityTerms"),
    ],
)
def test_parse_error_names_the_kind_of_term(field: str, label: str) -> None:
    term = {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a b"}}}
    v = run([*NODES, pod("p", affinity={field: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})])
    assert v.prefilter is not None
    assert v.prefilter.reasons[0].startswith(f'parsing pod: {label}: values[0][app]: Invalid value: "a b"')


def test_a_preferred_term_that_does_not_parse_also_rejects_the_pod() -> None:
    """PodInfo.Update parses preferred terms too; any error fails NewPodInfo."""
    weighted = {
        "weight": 10,
        "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b c"}}},
    }
    v = run(
        [
            *NODES,
            pod(
                "p", affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}}
            ),
        ]
    )
    assert v.prefilter is not None
    assert v.prefilter.reasons[0].startswith("parsing pod: preferredAffinityTerms: ")


def test_valid_selectors_are_not_rejected() -> None:
    term = {"topologyKey": "zone", "labelSelector": {"matchExpressions": [expr("app", "In", "web", "")]}}
    v = run(
        [
            *NODES,
            pod(
                "p", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
            ),
        ]
    )
    assert v.prefilter is None and v.fits


# --- the limits of apimachinery's validation, at their boundaries ------------------------


def test_label_value_and_name_lengths_at_63_and_64() -> None:
    from analyzers.simulator.selectors import label_value_errors, qualified_name_errors

    assert label_value_errors("a" * 63) == []
    assert label_value_errors("a" * 64) == ["must be no more than 63 characters"]
    assert qualified_name_errors("a" * 63) == []
    assert qualified_name_errors("a" * 64) == ["name part must be no more than 63 characters"]


def test_dns_prefix_length_at_253_and_254() -> None:
    from analyzers.simulator.selectors import qualified_name_errors

    prefix = ".".join(["a" * 63] * 3) + "." + "a" * 61  # 253 characters
    assert len(prefix) == 253 and qualified_name_errors(prefix + "/app") == []
    assert qualified_name_errors(prefix + "a/app") == ["prefix part must be no more than 253 characters"]


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("9223372036854775807", True),
        ("9223372036854775808", False),
        ("-9223372036854775808", True),
        ("-9223372036854775809", False),
    ],
)
def test_gt_value_parses_as_int64_exactly(value: str, ok: bool) -> None:
    from analyzers.records import Requirement
    from analyzers.simulator.selectors import requirement_errors

    errors = requirement_errors(Requirement("gen", "Gt", (value,)))
    int_error = [e for e in errors if "the value must be an integer" in e]
    assert (not int_error) is ok


def test_match_fields_with_in_and_one_value_is_valid_and_with_two_is_not() -> None:
    from analyzers.records import NodeSelectorTerm, Requirement
    from analyzers.simulator.selectors import node_term_valid

    assert node_term_valid(NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("a",)),)))
    assert not node_term_valid(
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("a", "b")),))
    )
    assert not node_term_valid(
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "Exists", ("a",)),))
    )
