"""dra-devices-unavailable: DynamicResources finds no devices for the pod's claims.

kube-scheduler's DynamicResources plugin (pkg/scheduler/framework/plugins/
dynamicresources/dynamicresources.go, v1.37.2) runs the structured allocator
(k8s.io/dynamic-resource-allocation/structured) for the pod's unallocated claims
on every node the other filters pass, and rejects each node where it finds no
devices with ``cannot allocate all claims`` -- UnschedulableAndUnresolvable, so
preemption never helps (evicting pods does not free devices; deallocating their
claims does). A request names a DeviceClass that does not exist: PreFilter's
``request R: device class C does not exist``.

For each request of each claim, the devices of the complete pools on those
nodes are counted step by step, as the allocator filters them
(analyzers.simulator.dra): matching the class's selectors, then the request's
selectors, not allocated to another claim, taint tolerated. The first step that
leaves too few devices on every node is the cause:

- ``no-matching-devices``: no device passes a selector -- which selector
  excluded them, the values the attributes it reads take ("model H100 on 0
  devices; A100-80GB on 16 devices on 2 nodes"), and a corrected selector when
  an equality names a value no device has but a close one exists (verified by
  re-simulating the claim with it);
- ``devices-allocated``: matching devices exist but other claims hold them --
  which claims, reserved for which pods (phase, age), claims still allocated to
  pods that finished or were deleted, or pods stuck terminating (verified:
  releasing them lets the pod fit);
- ``count-exceeds-node``: no node has as many matching devices as the request
  asks (``count`` or ``allocationMode: All`` with none);
- ``untolerated-device-taint``: the free matching devices carry a NoSchedule or
  NoExecute device taint the request does not tolerate (a toleration, verified);
- ``shared-counters-spent``: the free matching partitions' shared counters are
  spent by partitions already allocated (which ones);
- ``constraint-unsatisfiable``: enough devices per node, but no set shares the
  ``matchAttribute`` value;
- ``device-class-missing``: PreFilter's missing DeviceClass.

A claim's spec is immutable: remedies for it are a new claim (delete and
create), or a changed ResourceClaimTemplate for pods created from one.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.quantity import parse_quantity
from analyzers.records import (
    ClaimSpec,
    Device,
    DeviceRequest,
    DeviceSubRequest,
    DeviceToleration,
    Pod,
    ResourceClaim,
    ResourceSlice,
)
from analyzers.rules import _placement as P
from analyzers.rules._describe import names, plural
from analyzers.rules.context import RuleContext
from analyzers.simulator import codes as C
from analyzers.simulator.dra import cel
from analyzers.simulator.dra.allocator import gather_pools, taint_prevents
from analyzers.simulator.dra.plugin import (
    FILTER_TIMEOUT_DEFAULT,
    STOPPED,
    TIMED_OUT,
    allocated_state,
    format_seconds,
    pod_claims,
)
from analyzers.simulator.engine import simulate

RULE_ID = "dra-devices-unavailable"

NO_MATCH = "no-matching-devices"
ALLOCATED = "devices-allocated"
TOO_MANY = "count-exceeds-node"
TAINTED = "untolerated-device-taint"
CONSTRAINT = "constraint-unsatisfiable"
COUNTERS = "shared-counters-spent"
CLASS_MISSING = "device-class-missing"
UNKNOWN = "cannot-allocate"


@dataclass(slots=True)
class Census:
    """The devices one request can use, step by step, per node (name -> count)."""

    request: str
    claim: ResourceClaim
    sub: DeviceSubRequest
    total: dict[str, int] = field(default_factory=dict)
    class_ok: dict[str, int] = field(default_factory=dict)
    selected: dict[str, int] = field(default_factory=dict)
    free: dict[str, int] = field(default_factory=dict)
    tolerated: dict[str, int] = field(default_factory=dict)
    counters_left: dict[str, int] = field(default_factory=dict)  # tolerated, and their counters not spent
    spent_by: dict[str, list[str]] = field(default_factory=dict)  # counter set -> allocated partitions
    excluded_by: str = ""  # "class C selector #i" / "request selector #i"
    excluding_expression: str = ""
    devices: list[tuple[str, ResourceSlice, Device]] = field(default_factory=list)  # (node, slice, device)
    holders: dict[tuple[str, str, str], ResourceClaim] = field(default_factory=dict)
    cause: str = UNKNOWN

    def most(self, step: dict[str, int]) -> int:
        return max(step.values(), default=0)


def analyze(ctx: RuleContext) -> list[Finding]:
    findings = []
    for group in P.blocked(ctx, P.DRA):
        finding = _finding(ctx, group)
        if finding is not None:
            findings.append(finding)
    return findings


def _matches(expr: str, driver: str, d: Device) -> bool | None:
    compiled = cel.compile_selector(expr)
    if compiled.error:
        return None
    try:
        return cel.evaluate(compiled, cel.device_variable(driver, d.attributes, d.capacity, d.allow_multiple))
    except cel.CelError:
        return None


def _census(
    ctx: RuleContext, group: P.Blocked, claim: ResourceClaim, request: DeviceRequest
) -> Census | None:
    sub = request.exactly or (request.first_available[-1] if request.first_available else None)
    if sub is None:
        return None
    snap = ctx.snapshot
    cls = snap.device_classes.get(sub.class_name)
    c = Census(request.name, claim, sub)
    if cls is None:
        c.cause = CLASS_MISSING
        return c
    views = group.views
    usable = views.where(lambda p: C.DYNAMIC_RESOURCES in p and len(p) == 1, views.usable)
    slices = list(snap.resource_slices.values())
    state = allocated_state(snap)
    holders_by_device = {
        (r.driver, r.pool, r.device): other
        for other in snap.resource_claims.values()
        for r in other.allocation
        if not r.admin_access
    }
    excluded: Counter[str] = Counter()
    for i in views.indices(usable):
        node = snap.nodes[views.names[i]]
        for pool in gather_pools(node, slices, slices):
            if pool.incomplete or pool.invalid:
                continue
            left = _counters_left(pool, state.devices | state.shared, c.spent_by)
            for s in pool.slices:
                for d in s.devices:
                    did = (s.driver, s.pool, d.name)
                    name = node.name
                    c.total[name] = c.total.get(name, 0) + 1
                    c.devices.append((name, s, d))
                    ok = True
                    for k, expr in enumerate(cls.selectors):
                        if not _matches(expr, s.driver, d):
                            excluded[f"class {cls.name} selector #{k}\x00{expr}"] += 1
                            ok = False
                            break
                    if not ok:
                        continue
                    c.class_ok[name] = c.class_ok.get(name, 0) + 1
                    for k, expr in enumerate(sub.selectors):
                        if not _matches(expr, s.driver, d):
                            excluded[f"request selector #{k}\x00{expr}"] += 1
                            ok = False
                            break
                    if not ok:
                        continue
                    c.selected[name] = c.selected.get(name, 0) + 1
                    if did in state.devices:
                        if did in holders_by_device:
                            c.holders[did] = holders_by_device[did]
                        continue
                    c.free[name] = c.free.get(name, 0) + 1
                    if taint_prevents(d, sub):
                        continue
                    c.tolerated[name] = c.tolerated.get(name, 0) + 1
                    if all(
                        parse_quantity(q) <= left.get(cs, {}).get(counter, parse_quantity(q))
                        for cs, used in d.consumes_counters
                        for counter, q in used.items()
                    ):
                        c.counters_left[name] = c.counters_left.get(name, 0) + 1
    want = sub.count if sub.mode == "ExactCount" else 1
    if excluded:
        top = excluded.most_common(1)[0][0]
        c.excluded_by, c.excluding_expression = top.split("\x00", 1)
    if c.most(c.selected) == 0:
        c.cause = NO_MATCH
    elif c.most(c.selected) < want:
        c.cause = TOO_MANY
    elif c.most(c.free) < want:
        c.cause = ALLOCATED
    elif c.most(c.tolerated) < want:
        c.cause = TAINTED
    elif c.most(c.counters_left) < want:
        c.cause = COUNTERS
    elif claim.spec.constraints:
        c.cause = CONSTRAINT
    return c


def _finding(ctx: RuleContext, group: P.Blocked) -> Finding | None:
    snap = ctx.snapshot
    pod = group.pod
    claims = pod_claims(snap, pod) or []
    censuses = [
        c
        for claim in claims
        if not claim.allocated
        for request in claim.spec.requests
        if (c := _census(ctx, group, claim, request)) is not None
    ]
    blocking = [c for c in censuses if c.cause != UNKNOWN] or censuses
    if not blocking:
        return None
    c = blocking[0]
    ref = group.ref
    who = f"{P.kind_word(ref)} has {P.pending_words(group, ctx.now)}"
    claim_words = f"ResourceClaim {c.claim.namespace}/{c.claim.name}, request {c.request}"
    want = (
        f"{c.sub.count} device{'s' if c.sub.count != 1 else ''}"
        if c.sub.mode == "ExactCount"
        else "all devices"
    )
    verdict = group.verdict
    reason = verdict.prefilter.reasons[0] if verdict.prefilter is not None else "cannot allocate all claims"
    parts = [f'{who}; kube-scheduler\'s DynamicResources says "{reason}".']
    if STOPPED in verdict.message:
        parts = [f"{who}; {verdict.message}: what kube-scheduler concludes there is not known."]
    elif TIMED_OUT in verdict.message:
        configured = ctx.dra_filter_timeout(pod)
        timeout = (
            f"filterTimeout of {format_seconds(FILTER_TIMEOUT_DEFAULT)} (the default)"
            if configured is None
            else f"configured filterTimeout of {format_seconds(configured)}"
        )
        parts = [
            f"{who}; kube-scheduler's DynamicResources may time out searching for devices "
            f'("{verdict.message}"): unstick\'s search passed the step count that stands for the '
            f"{timeout}, and whether kube-scheduler times out depends on its wall clock (a "
            "timeout is an Error: the pod is retried with backoff)."
        ]
    evidence: dict[str, Any] = {
        "cause": c.cause,
        "claim": f"{c.claim.namespace}/{c.claim.name}",
        "request": c.request,
        "device_class": c.sub.class_name,
        "asks": want,
        # Every node with devices in a pool gets a number in every column (0, not a gap:
        # a missing cell reads as "unknown" in the evidence table).
        "devices_per_node": {
            column: {node: counts.get(node, 0) for node in sorted(c.total)}
            for column, counts in (
                ("in_pools", c.total),
                ("matching_class", c.class_ok),
                ("matching_request", c.selected),
                ("free", c.free),
                ("free_and_tolerated", c.tolerated),
            )
        },
    }
    remedies: list[Remedy] = []
    if c.cause == CLASS_MISSING:
        existing = sorted(snap.device_classes)
        parts.append(
            f"{claim_words} names DeviceClass {c.sub.class_name}, which does not exist; the cluster has "
            f"{', '.join(existing) or 'no DeviceClass'}."
        )
        close = difflib.get_close_matches(c.sub.class_name, existing, n=1)
        if close:
            remedies.extend(_replace_claim(ctx, group, c, class_name=close[0]))
    elif c.cause == NO_MATCH:
        parts.append(
            f"{claim_words} asks {want} of class {c.sub.class_name}; no device on the eligible nodes matches."
        )
        if c.excluded_by:
            parts.append(f"The {c.excluded_by} (`{c.excluding_expression}`) excludes them.")
            census_words, values = _value_census(c)
            if census_words:
                parts.append(census_words)
                evidence["attribute_values"] = values
            remedies.extend(_corrected_selector(ctx, group, c, values))
    elif c.cause == TOO_MANY:
        most = c.most(c.selected)
        parts.append(
            f"{claim_words} asks {want}; {sum(c.selected.values())} matching devices exist, but the most on "
            f"any one node is {most} (a claim's devices are all on the node the pod runs on)."
        )
    elif c.cause == ALLOCATED:
        parts.append(
            f"{claim_words} asks {want}; {sum(c.selected.values())} devices match, and other claims hold "
            f"{len(c.holders)} of them."
        )
        held_words, stale, held = _holders(ctx, c)
        parts.append(held_words)
        evidence["holders"] = held
        if stale:
            remedies.extend(_release(ctx, group, stale))
    elif c.cause == TAINTED:
        parts.append(
            f"{claim_words} asks {want}; the free matching devices carry a device taint the request does not tolerate."
        )
        remedies.extend(_tolerate(ctx, group, c))
    elif c.cause == COUNTERS:
        spent = "; ".join(
            f"counter set {cs} spent by {names(parts)}" for cs, parts in sorted(c.spent_by.items())
        )
        parts.append(
            f"{claim_words} asks {want}; matching partitions are free, but the shared counters they consume are "
            f"spent by partitions already allocated ({spent or 'other partitions'}): a partitionable device's "
            "partitions share its counters (DRAPartitionableDevices)."
        )
        evidence["counters_spent_by"] = c.spent_by
    elif c.cause == CONSTRAINT:
        parts.append(
            f"{claim_words}: enough devices match on some node, but no set of them satisfies the claim's "
            f"constraints ({', '.join(x.match_attribute or x.distinct_attribute for x in c.claim.spec.constraints)})."
        )
    parts.append(
        "DynamicResources' rejections are UnschedulableAndUnresolvable: preemption does not help (evicting pods "
        "frees no device; only releasing the claims that hold them does)."
    )
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.CRITICAL,
        subject=ref,
        title=_title(c, want),
        explanation=" ".join(parts),
        evidence=evidence,
        remedies=tuple(remedies),
        cause=c.cause,
        pods=tuple(group.pod_names),
    )


def _counters_left(
    pool: Any, in_use: frozenset[tuple[str, str, str]], spent_by: dict[str, list[str]]
) -> dict[str, dict[str, Decimal]]:
    """The pool's counter sets less what allocated partitions consume (checkAvailableCounters)."""
    left = {
        cs: {n: parse_quantity(q) for n, q in counters.items()} for cs, counters in pool.counter_sets.items()
    }
    for group in (pool.slices, pool.others):
        for s in group:
            for d in s.devices:
                if (s.driver, s.pool, d.name) not in in_use:
                    continue
                for cs, used in d.consumes_counters:
                    spent_by.setdefault(cs, [])
                    if d.name not in spent_by[cs]:
                        spent_by[cs].append(d.name)
                    for n, q in used.items():
                        if n in left.get(cs, {}):
                            left[cs][n] -= parse_quantity(q)
    return left


def _title(c: Census, want: str) -> str:
    return {
        NO_MATCH: f"No device matches ResourceClaim {c.claim.name} (request {c.request}, class {c.sub.class_name})",
        ALLOCATED: f"Every device matching ResourceClaim {c.claim.name} is allocated to other claims",
        TOO_MANY: f"ResourceClaim {c.claim.name} asks {want}; no node has that many",
        TAINTED: f"The free devices for ResourceClaim {c.claim.name} are tainted",
        CONSTRAINT: f"No devices satisfy ResourceClaim {c.claim.name}'s constraints",
        COUNTERS: f"The partitions ResourceClaim {c.claim.name} could use have their shared counters spent",
        CLASS_MISSING: f"DeviceClass {c.sub.class_name} does not exist",
    }.get(c.cause, f"No devices can be allocated for ResourceClaim {c.claim.name}")


def _value_census(c: Census) -> tuple[str, dict[str, dict[str, list[int]]]]:
    """What the excluding selector reads, and the values those attributes take on the
    devices: {attribute: {value: [devices, nodes]}}."""
    entries = cel.reads(c.excluding_expression) or ()
    values: dict[str, dict[str, list[int]]] = {}
    words = []
    for kind, domain, ident in entries:
        if kind != "attributes":
            continue
        per: dict[str, tuple[int, set[str]]] = {}
        for node, s, d in c.devices:
            found = d.attributes.get(f"{domain}/{ident}") or (
                d.attributes.get(ident) if domain == s.driver else None
            )
            if found is None:
                continue
            text = str(found[1])
            count, nodes = per.get(text, (0, set()))
            nodes.add(node)
            per[text] = (count + 1, nodes)
        wanted = re.findall(rf'\.{re.escape(ident)}\s*==\s*"([^"]*)"', c.excluding_expression)
        for w in wanted:
            per.setdefault(w, (0, set()))
        values[ident] = {v: [n, len(ns)] for v, (n, ns) in sorted(per.items())}
        words.append(
            "; ".join(
                f"{ident} {v} on {plural(n, 'device')}" + (f" on {plural(len(ns), 'node')}" if n else "")
                for v, (n, ns) in sorted(per.items(), key=lambda kv: (-kv[1][0], kv[0]))
            )
        )
    return ("Values on the eligible nodes: " + "; ".join(words) + ".") if words else "", values


def _corrected_selector(
    ctx: RuleContext, group: P.Blocked, c: Census, values: dict[str, dict[str, list[int]]]
) -> list[Remedy]:
    if not c.excluded_by.startswith("request selector #"):
        return []
    k = int(c.excluded_by.rsplit("#", 1)[1])
    expr = c.sub.selectors[k]
    for ident, per in values.items():
        for wanted in re.findall(rf'\.{re.escape(ident)}\s*==\s*"([^"]*)"', expr):
            present = [v for v, (n, _) in per.items() if n > 0]
            close = difflib.get_close_matches(wanted, present, n=1, cutoff=0.3)
            if not close:
                continue
            fixed = expr.replace(f'"{wanted}"', f'"{close[0]}"')
            selectors = (*c.sub.selectors[:k], fixed, *c.sub.selectors[k + 1 :])
            return _replace_claim(
                ctx, group, c, selectors=selectors, why=f"{ident} {wanted!r} -> {close[0]!r}"
            )
    return []


def _replace_claim(
    ctx: RuleContext,
    group: P.Blocked,
    c: Census,
    *,
    selectors: tuple[str, ...] | None = None,
    class_name: str | None = None,
    tolerations: tuple[DeviceToleration, ...] | None = None,
    why: str = "",
) -> list[Remedy]:
    sub = c.sub
    new_sub = replace(
        sub,
        selectors=sub.selectors if selectors is None else selectors,
        class_name=sub.class_name if class_name is None else class_name,
        tolerations=sub.tolerations if tolerations is None else tolerations,
    )
    requests = tuple(
        replace(r, exactly=new_sub) if r.name == c.request and r.exactly is not None else r
        for r in c.claim.spec.requests
    )
    spec = ClaimSpec(requests, c.claim.spec.constraints)
    new_claim = replace(c.claim, spec=spec)
    snap = ctx.snapshot.replace(new_claim)
    after = simulate(snap, group.pod, kube_version=ctx.version)
    verified = after.fits
    verification = (
        f"re-simulated with the changed claim: the pod fits on {plural(after.feasible_nodes, 'node')}"
        if verified
        else f"re-simulated with the changed claim: still unschedulable ({after.message})"
    )
    template = _template_name(group.pod, c.claim)
    body = {"devices": claim_devices(spec)}
    if template:
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": template, "namespace": c.claim.namespace},
            "spec": {"spec": body},
        }
        title = f"Change ResourceClaimTemplate {template}" + (f" ({why})" if why else "")
        target = ObjectRef("ResourceClaimTemplate", c.claim.namespace, template)
    else:
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": c.claim.name, "namespace": c.claim.namespace},
            "spec": body,
        }
        title = f"Re-create ResourceClaim {c.claim.name} (its spec is immutable)" + (
            f" ({why})" if why else ""
        )
        target = ObjectRef("ResourceClaim", c.claim.namespace, c.claim.name)
    remedy = ctx.renderer.manifest(
        title, target, "object.yaml.j2", verified=verified, verification=verification, obj=obj
    )
    if not template:
        remedy = replace(
            remedy,
            command=f"kubectl delete resourceclaim {c.claim.name} -n {c.claim.namespace} && kubectl apply -f -",
        )
    return [remedy]


def _template_name(pod: Pod, claim: ResourceClaim) -> str:
    for entry in pod.spec.resource_claims:
        if entry.template_name and pod.resource_claim_statuses.get(entry.name) == claim.name:
            return entry.template_name
    return ""


def claim_devices(spec: ClaimSpec) -> dict[str, Any]:
    """spec.devices of a claim (resource.k8s.io/v1) from the record."""

    def sub(s: DeviceSubRequest, exact: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"deviceClassName": s.class_name}
        if s.selectors:
            out["selectors"] = [{"cel": {"expression": e}} for e in s.selectors]
        out["allocationMode"] = s.mode
        if s.mode == "ExactCount":
            out["count"] = s.count
        if exact and s.admin_access is not None:
            out["adminAccess"] = s.admin_access
        if s.tolerations:
            out["tolerations"] = [
                {
                    k: v
                    for k, v in (
                        ("key", t.key),
                        ("operator", t.operator),
                        ("value", t.value),
                        ("effect", t.effect),
                    )
                    if v
                }
                for t in s.tolerations
            ]
        if s.capacity:
            out["capacity"] = {"requests": dict(s.capacity)}
        return out

    requests: list[dict[str, Any]] = []
    for r in spec.requests:
        if r.exactly is not None:
            requests.append({"name": r.name, "exactly": sub(r.exactly, True)})
        else:
            requests.append(
                {
                    "name": r.name,
                    "firstAvailable": [{"name": s.name, **sub(s, False)} for s in r.first_available],
                }
            )
    out: dict[str, Any] = {"requests": requests}
    if spec.constraints:
        out["constraints"] = [
            {
                "requests": list(x.requests),
                **({"matchAttribute": x.match_attribute} if x.match_attribute else {}),
            }
            for x in spec.constraints
        ]
    return out


def _holders(ctx: RuleContext, c: Census) -> tuple[str, list[ResourceClaim], list[dict[str, Any]]]:
    snap = ctx.snapshot
    pods_by_uid = {p.uid: p for p in snap.pods.values() if p.uid}
    claims = {h.key: h for h in c.holders.values()}
    words = []
    stale: list[ResourceClaim] = []
    held = []
    for key in sorted(claims):
        h = claims[key]
        devices = [d for d, other in c.holders.items() if other.key == key]
        consumers = []
        gone = True
        for r in h.reserved_for:
            p = pods_by_uid.get(r.uid)
            if p is None:
                consumers.append(f"pod {r.name} (deleted)")
                continue
            age = f", {int((ctx.now - p.created) // 60)}m old" if p.created else ""
            if p.deleted is not None:
                consumers.append(f"pod {p.name} (terminating since {int((ctx.now - p.deleted) // 60)}m{age})")
            elif p.phase in ("Succeeded", "Failed"):
                consumers.append(f"pod {p.name} ({p.phase}{age})")
            else:
                consumers.append(f"pod {p.name} ({p.phase}{age})")
                gone = False
        if not h.reserved_for:
            consumers.append("no pod (reservedFor is empty)")
        if gone:
            stale.append(h)
        held.append(
            {
                "claim": f"{h.namespace}/{h.name}",
                "devices": ["/".join(d) for d in devices],
                "reserved_for": consumers,
                "stale": gone,
            }
        )
        words.append(
            f"ResourceClaim {h.namespace}/{h.name} holds {names(['/'.join(d) for d in devices])} for {', '.join(consumers)}"
        )
    text = "; ".join(words) + "."
    if stale:
        text += (
            f" {plural(len(stale), 'claim')} {'is' if len(stale) == 1 else 'are'} still allocated although no running "
            "pod uses it (the resourceclaim controller deallocates a claim once its pods are gone; a pod stuck "
            "terminating or a deleted pod's leftover keeps the devices)."
        )
    return text, stale, held


def _release(ctx: RuleContext, group: P.Blocked, stale: Sequence[ResourceClaim]) -> list[Remedy]:
    snap = ctx.snapshot.replace(remove=[("resource_claims", h.key) for h in stale])
    after = simulate(snap, group.pod, kube_version=ctx.version)
    names_ = " ".join(h.name for h in stale)
    ns = stale[0].namespace
    verification = (
        f"re-simulated without {plural(len(stale), 'stale claim')}: the pod fits on {plural(after.feasible_nodes, 'node')}"
        if after.fits
        else f"re-simulated without them: still unschedulable ({after.message})"
    )
    return [
        ctx.renderer.command(
            f"Release the devices held by {plural(len(stale), 'claim')} no running pod uses",
            ObjectRef("ResourceClaim", ns, stale[0].name),
            f"kubectl delete resourceclaim -n {ns} {names_}",
            verified=after.fits,
            verification=verification,
            note="Check first that no workload still needs them; a claim from a template is re-created for its pod.",
        )
    ]


def _tolerate(ctx: RuleContext, group: P.Blocked, c: Census) -> list[Remedy]:
    taints = {t for _, _, d in c.devices for t in d.taints if t.effect in ("NoSchedule", "NoExecute")}
    if not taints:
        return []
    added = tuple(
        DeviceToleration(t.key, "Equal", t.value, t.effect)
        for t in sorted(taints, key=lambda t: (t.key, t.value, t.effect))
    )
    return _replace_claim(
        ctx, group, c, tolerations=c.sub.tolerations + added, why="tolerate the device taint"
    )
