"""The reason catalogue: kube-scheduler's reason texts (upstream plugin files
named in analyzers/messages/reasons.py) mapped to codes and plugins."""

from __future__ import annotations

import pytest

from analyzers.messages import reasons as r
from analyzers.messages.reasons import ALL_CODES, Taint, classify_reason, classify_truncated, describe

# (text as printed, code, plugin). Every row is an upstream string (file in the id).
TABLE = [
    # noderesources/fit.go
    ("Insufficient cpu", r.INSUFFICIENT_RESOURCE, "NodeResourcesFit"),
    ("Insufficient nvidia.com/gpu", r.INSUFFICIENT_RESOURCE, "NodeResourcesFit"),
    ("Insufficient hugepages-2Mi", r.INSUFFICIENT_RESOURCE, "NodeResourcesFit"),
    ("Too many pods", r.TOO_MANY_PODS, "NodeResourcesFit"),
    # nodeaffinity/node_affinity.go, all generations
    ("node(s) didn't match Pod's node affinity/selector", r.NODE_AFFINITY_MISMATCH, "NodeAffinity"),
    ("node(s) didn't match Pod's node affinity", r.NODE_AFFINITY_MISMATCH, "NodeAffinity"),
    ("node(s) didn't match node selector", r.NODE_AFFINITY_MISMATCH, "NodeAffinity"),
    ("node(s) didn't match scheduler-enforced node affinity", r.NODE_AFFINITY_MISMATCH, "NodeAffinity"),
    ("MatchNodeSelector", r.NODE_AFFINITY_MISMATCH, "NodeAffinity"),
    # tainttoleration/taint_toleration.go
    ("node(s) had untolerated taint(s)", r.UNTOLERATED_TAINT, "TaintToleration"),
    ("node(s) had taints that the pod didn't tolerate", r.UNTOLERATED_TAINT, "TaintToleration"),
    ("PodToleratesNodeTaints", r.UNTOLERATED_TAINT, "TaintToleration"),
    # nodeunschedulable, nodename, nodeports
    ("node(s) were unschedulable", r.NODE_UNSCHEDULABLE, "NodeUnschedulable"),
    ("CheckNodeUnschedulable", r.NODE_UNSCHEDULABLE, "NodeUnschedulable"),
    ("node(s) didn't match the requested node name", r.NODE_NAME_MISMATCH, "NodeName"),
    ("node(s) didn't match the requested hostname", r.NODE_NAME_MISMATCH, "NodeName"),
    ("node(s) didn't have free ports for the requested pod ports", r.NODE_PORTS, "NodePorts"),
    ("PodFitsHostPorts", r.NODE_PORTS, "NodePorts"),
    # interpodaffinity/filtering.go
    ("node(s) didn't match pod affinity rules", r.POD_AFFINITY_MISMATCH, "InterPodAffinity"),
    ("node(s) didn't match pod anti-affinity rules", r.POD_ANTI_AFFINITY_MISMATCH, "InterPodAffinity"),
    (
        "node(s) didn't satisfy existing pods anti-affinity rules",
        r.EXISTING_POD_ANTI_AFFINITY,
        "InterPodAffinity",
    ),
    ("node(s) didn't match pod affinity/anti-affinity", r.POD_AFFINITY_MISMATCH, "InterPodAffinity"),
    ("node(s) didn't match pod affinity/anti-affinity rules", r.POD_AFFINITY_MISMATCH, "InterPodAffinity"),
    ("MatchInterPodAffinity", r.POD_AFFINITY_MISMATCH, "InterPodAffinity"),
    # podtopologyspread/filtering.go
    ("node(s) didn't match pod topology spread constraints", r.TOPOLOGY_SPREAD_MISMATCH, "PodTopologySpread"),
    (
        "node(s) didn't match pod topology spread constraints (missing required label)",
        r.TOPOLOGY_SPREAD_MISMATCH,
        "PodTopologySpread",
    ),
    # volumebinding/binder.go + volume_binding.go
    ("pod has unbound immediate PersistentVolumeClaims", r.VOLUME_UNBOUND_PVC, "VolumeBinding"),
    ("node(s) didn't find available persistent volumes to bind", r.VOLUME_NO_PV, "VolumeBinding"),
    ("node(s) had volume node affinity conflict", r.VOLUME_NODE_AFFINITY_CONFLICT, "VolumeBinding"),
    (
        "node(s) didn't match PersistentVolume's node affinity",
        r.VOLUME_NODE_AFFINITY_CONFLICT,
        "VolumeBinding",
    ),
    ("node(s) did not have enough free storage", r.VOLUME_INSUFFICIENT_STORAGE, "VolumeBinding"),
    (
        "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
        r.PVC_LOST,
        "VolumeBinding",
    ),
    ('persistentvolumeclaim "data-web-0" not found', r.PVC_NOT_FOUND, "VolumeBinding"),
    ('persistentvolumeclaim "data-web-0" is being deleted', r.PVC_BEING_DELETED, "VolumeBinding"),
    (
        'persistentvolumeclaim "data-web-0" bound to non-existent persistentvolume "pv-1"',
        r.PVC_LOST,
        "VolumeBinding",
    ),
    (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "web-0-scratch"',
        r.PVC_NOT_FOUND,
        "VolumeBinding",
    ),
    ("CheckVolumeBinding", r.VOLUME_NO_PV, "VolumeBinding"),
    # volumezone, volumerestrictions, nodevolumelimits
    ("node(s) had no available volume zone", r.VOLUME_ZONE_CONFLICT, "VolumeZone"),
    ("NoVolumeZoneConflict", r.VOLUME_ZONE_CONFLICT, "VolumeZone"),
    ("node(s) had no available disk", r.VOLUME_RESTRICTIONS, "VolumeRestrictions"),
    (
        "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",
        r.VOLUME_RESTRICTIONS,
        "VolumeRestrictions",
    ),
    ("NoDiskConflict", r.VOLUME_RESTRICTIONS, "VolumeRestrictions"),
    ("node(s) exceed max volume count", r.VOLUME_LIMITS, "NodeVolumeLimits"),
    ("MaxVolumeCount", r.VOLUME_LIMITS, "NodeVolumeLimits"),
    # predicates/error.go (1.10-1.17) node conditions
    ("node(s) were not ready", r.NODE_NOT_READY, "CheckNodeCondition"),
    ("node(s) had unknown conditions", r.NODE_NOT_READY, "NodeUnschedulable"),
    ("CheckNodeCondition", r.NODE_NOT_READY, "CheckNodeCondition"),
    ("node(s) had memory pressure", r.NODE_PRESSURE, "CheckNodeCondition"),
    ("CheckNodeMemoryPressure", r.NODE_PRESSURE, "CheckNodeCondition"),
    ("CheckNodeDiskPressure", r.NODE_PRESSURE, "CheckNodeCondition"),
    # schedulinggates, dynamicresources
    ("waiting for scheduling gates: [example.com/quota]", r.SCHEDULING_GATED, "SchedulingGates"),
    ("Scheduling is blocked due to non-empty scheduling gates", r.SCHEDULING_GATED, "SchedulingGates"),
    ("cannot allocate all claims", r.DRA_CANNOT_ALLOCATE, "DynamicResources"),
    ("resourceclaim not available on the node", r.DRA_CLAIM_UNAVAILABLE, "DynamicResources"),
    ("request gpu: device class gpu.example.com does not exist", r.DRA_CLAIM_MISSING, "DynamicResources"),
    # preemption
    ("No preemption victims found for incoming pod", r.PREEMPTION_NO_VICTIMS, "DefaultPreemption"),
    ("Preemption is not helpful for scheduling", r.PREEMPTION_NOT_HELPFUL, "DefaultPreemption"),
    ("not eligible due to preemptionPolicy=Never.", r.PREEMPTION_NOT_ELIGIBLE, "DefaultPreemption"),
    (
        "not eligible due to a terminating pod on the nominated node.",
        r.PREEMPTION_NOT_ELIGIBLE,
        "DefaultPreemption",
    ),
    ("no nodes available to schedule pods", r.NO_NODES, None),
]


@pytest.mark.parametrize(("text", "code", "plugin"), TABLE, ids=[row[0][:60] for row in TABLE])
def test_classification_table(text: str, code: str, plugin: str | None) -> None:
    info = classify_reason(text)
    assert (info.code, info.plugin) == (code, plugin)


@pytest.mark.parametrize(
    ("text", "resource"),
    [("Insufficient cpu", "cpu"), ("Insufficient nvidia.com/gpu", "nvidia.com/gpu"), ("Insufficient ", None)],
)
def test_insufficient_resource_names_the_resource(text: str, resource: str | None) -> None:
    assert classify_reason(text).resource == resource


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        # 1.18-1.23 taint_toleration.go: "node(s) had taint {%s: %s}, that the pod didn't tolerate"
        ("node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate",
         "node-role.kubernetes.io/master", ""),
        # 1.24+: "node(s) had untolerated taint {%s: %s}"
        ("node(s) had untolerated taint {node.kubernetes.io/unreachable: }", "node.kubernetes.io/unreachable", ""),
        ("node(s) had untolerated taint {CriticalAddonsOnly: true}", "CriticalAddonsOnly", "true"),
        ("node(s) had untolerated taint {machine-check-exception: memory}", "machine-check-exception", "memory"),
        # seen without the ": " in hand-written notes
        ("node(s) had untolerated taint {node.kubernetes.io/disk-pressure}", "node.kubernetes.io/disk-pressure", ""),
    ],
)  # fmt: skip
def test_taints_are_parsed_into_key_and_value(text: str, key: str, value: str) -> None:
    info = classify_reason(text)
    assert info.code == r.UNTOLERATED_TAINT
    assert info.plugin == "TaintToleration"
    assert info.taint == Taint(key, value)


def test_newest_taint_reason_names_no_taint() -> None:
    assert classify_reason("node(s) had untolerated taint(s)").taint is None


def test_pvc_names_are_extracted() -> None:
    assert classify_reason('persistentvolumeclaim "data-web-0" not found').object_name == "data-web-0"


@pytest.mark.parametrize(
    "text",
    [
        "Insufficient cpu.",
        "  Insufficient cpu  ",
        "pod has unbound immediate PersistentVolumeClaims (repeated 3 times)",
        "NODE(S) WERE UNSCHEDULABLE",
    ],
)
def test_tolerates_full_stops_spaces_repeats_and_case(text: str) -> None:
    assert classify_reason(text).code != r.OTHER


@pytest.mark.parametrize(
    "text", ["", "node(s) were eaten by a grue", "42", "Insufficient", "{", "node(s) had"]
)
def test_unknown_text_is_other_without_plugin(text: str) -> None:
    info = classify_reason(text)
    assert (info.code, info.plugin) == (r.OTHER, None)


def test_catalogue_texts_are_unique_and_codes_known() -> None:
    texts = [t for t, _, _ in (*r.CATALOGUE, *r.LEGACY_PREDICATES)]
    assert len(texts) == len(set(texts))
    assert {code for _, code, _ in (*r.CATALOGUE, *r.LEGACY_PREDICATES)} <= set(ALL_CODES)
    assert len(ALL_CODES) == len(set(ALL_CODES))


def test_every_code_has_a_meaning() -> None:
    other = describe(r.ReasonInfo(r.OTHER, None))
    for code in ALL_CODES:
        meaning = describe(r.ReasonInfo(code, None))
        assert meaning and "{" not in meaning
        if code != r.OTHER:
            assert meaning != other, code


def test_meaning_names_the_resource_and_taint() -> None:
    assert "nvidia.com/gpu" in classify_reason("Insufficient nvidia.com/gpu").meaning
    assert "dedicated=gpu" in classify_reason("node(s) had untolerated taint {dedicated: gpu}").meaning
    assert "'data-0'" in classify_reason('persistentvolumeclaim "data-0" not found').meaning


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Preemption is not helpful for sch", r.PREEMPTION_NOT_HELPFUL),
        ("node(s) didn't match Pod's node aff", r.NODE_AFFINITY_MISMATCH),
        ("node(s) had untolerated taint {node-role.kubernetes", r.UNTOLERATED_TAINT),
    ],
)
def test_a_cut_short_reason_is_recognised_by_its_beginning(text: str, code: str) -> None:
    guess = classify_truncated(text)
    assert guess is not None and guess.code == code


@pytest.mark.parametrize("text", ["P", "node(s)", "Insufficient", "something else entirely"])
def test_cut_short_guess_refuses_ambiguous_text(text: str) -> None:
    assert classify_truncated(text) is None


def test_cut_short_insufficient_keeps_the_code_but_not_the_resource() -> None:
    # "Insufficient nvid" may be nvidia.com/gpu or anything else: the code is certain, the resource is not.
    guess = classify_truncated("Insufficient nvid")
    assert guess is not None
    assert (guess.code, guess.resource) == (r.INSUFFICIENT_RESOURCE, None)


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("node.kubernetes.io/unreachable", "repair the node"),
        ("node.kubernetes.io/not-ready", "repair the node"),
        ("node.kubernetes.io/disk-pressure", "repair the node"),
        ("node.kubernetes.io/unschedulable", "going away"),
        ("ToBeDeletedByClusterAutoscaler", "going away"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "once the node is ready"),
        ("node-role.kubernetes.io/control-plane", "kept off it on purpose"),
    ],
)
def test_a_taint_kubernetes_sets_itself_says_what_it_means(key: str, says: str) -> None:
    info = classify_reason(f"node(s) had untolerated taint {{{key}: }}")
    assert info.taint is not None and info.taint.key == key
    assert says in describe(info)
    assert "tolerate" in describe(info)


def test_a_teams_own_taint_gets_no_component_clause() -> None:
    info = classify_reason("node(s) had untolerated taint {dedicated: gpu}")
    assert describe(info).endswith("that the pod does not tolerate")


# pkg/scheduler/framework/plugins/dynamicresources/{dynamicresources,nativedynamicresources}.go
# (1.34-1.36, as summarised in reference/anchors-2026.md): the DRA wordings, with their codes.
@pytest.mark.parametrize(
    ("text", "code", "resource"),
    [
        ("timed out trying to allocate devices", r.DRA_CANNOT_ALLOCATE, None),
        ("node worker-3: timed out trying to allocate devices", r.DRA_CANNOT_ALLOCATE, None),
        ("cannot allocate all claims", r.DRA_CANNOT_ALLOCATE, None),
        ("Insufficient resources: cpu (requested: 4, used: 2, capacity: 4)", r.INSUFFICIENT_RESOURCE, "cpu"),
        (
            "Insufficient resources: memory (requested: 8Gi, used: 0, capacity: 4Gi)",
            r.INSUFFICIENT_RESOURCE,
            "memory",
        ),
        ('pod "ml/trainer-0": ResourceClaim not created yet', r.DRA_CLAIM_MISSING, None),
        ("request gpu: device class a100.nvidia.com does not exist", r.DRA_CLAIM_MISSING, None),
        (
            "resource claim ml/trainer-0-gpu is in the process of being allocated",
            r.DRA_CLAIM_UNAVAILABLE,
            None,
        ),
    ],
)
def test_dynamic_resources_wordings(text: str, code: str, resource: str | None) -> None:
    info = classify_reason(text)
    assert (info.code, info.plugin, info.resource) == (code, r.DYNAMIC_RESOURCES, resource)


def test_a_histogram_with_the_dra_wordings_keeps_every_count() -> None:
    from analyzers.messages import parse_message_uncached

    parsed = parse_message_uncached(
        "0/6 nodes are available: 1 timed out trying to allocate devices, 2 Insufficient resources: cpu "
        "(requested: 4, used: 2, capacity: 4), 3 cannot allocate all claims. still not schedulable, "
        "preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
    )
    assert [(x.count, x.code) for x in parsed.reasons] == [
        (1, r.DRA_CANNOT_ALLOCATE),
        (2, r.INSUFFICIENT_RESOURCE),
        (3, r.DRA_CANNOT_ALLOCATE),
    ]
    assert parsed.notes == ("still not schedulable",)
