"""Karpenter's reasons for not disrupting (consolidating, expiring, drifting) a node.

Events ``DisruptionBlocked`` and ``Unconsolidatable`` on the Node and NodeClaim
(kubernetes-sigs/karpenter ``pkg/controllers/disruption/events/events.go``), their
causes from:

- v0.32-v0.37 ``pkg/controllers/disruption/types.go`` ``NewCandidate``, wrapped as
  ``Cannot disrupt Node: <cause>`` / ``Cannot disrupt NodeClaim: <cause>`` (before v0.32,
  ``Cannot deprovision Node: <cause>`` / ``Cannot deprovision Machine: <cause>``):
  ``state node doesn't contain both a node and a nodeclaim``, ``state node is marked for
  deletion``, ``state node isn't initialized``, ``candidate is already being
  deprovisioned``, ``state node is nominated for a pending pod``, ``disruption is blocked
  through the "karpenter.sh/do-not-disrupt" annotation``, ``state node doesn't have
  required label "<label>"``, ``state node doesn't have the Karpenter owner label``,
  ``nodepool "<name>" can't be resolved for state node``, ``instance type "<name>" can't be
  resolved``;
- v1.0-v1.2 ``pkg/controllers/state/statenode.go`` ``ValidateNodeDisruptable`` (the same
  causes, ``candidate is already being disrupted``), v1.3+ without ``state``: ``node isn't
  managed by karpenter``, ``nodeclaim does not have an associated node``, ``node isn't
  initialized``, ``node is deleting or marked for deletion``, ``node is nominated for a
  pending pod``, ``node doesn't have required label "karpenter.sh/nodepool"``, printed
  through ``pretty.Sentence`` (first letter capitalised, final full stop);
  ``NodePool "<name>" not found``;
- the NodePool's budgets (``events.go``): ``No allowed disruptions due to blocking budget``,
  ``No allowed disruptions for disruption reason <reason> due to blocking budget``;
- ``Unconsolidatable`` (``consolidation.go``, ``emptiness.go``): ``Can't replace with a
  cheaper node``, ``Can't remove without creating <n> candidates``, ``NodePool "<name>"
  has consolidation disabled`` (``has non-empty consolidation disabled``),
  ``SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node``,
  ``SpotToSpotConsolidation requires <n> cheaper instance type options ...``, ``Instance
  Type "<name>" not found``, ``Node does not have label "<label>"``.

PDB and ``do-not-disrupt`` pod causes are eviction refusals (analyzers.messages.eviction).
"""

from __future__ import annotations

import re
from typing import Final

# What blocks the disruption (``Eviction.blocker``).
NOMINATED: Final = "nominated"
NO_NODE: Final = "no-node-or-nodeclaim"
NOT_INITIALIZED: Final = "not-initialized"
DELETING: Final = "deleting"
ALREADY_DISRUPTING: Final = "already-disrupting"
NOT_MANAGED: Final = "not-managed"
NODEPOOL_MISSING: Final = "nodepool-missing"
INSTANCE_TYPE_UNKNOWN: Final = "instance-type-unknown"
BUDGET: Final = "budget"
UNCONSOLIDATABLE: Final = "unconsolidatable"
NODE_ANNOTATION: Final = "do-not-disrupt-annotation"

_I: Final = re.IGNORECASE
_WRAPPER_RE: Final = re.compile(r"Cannot (?:disrupt|deprovision) (Node|NodeClaim|Machine): ?", _I)
_CAUSES: Final = (
    (NOMINATED, re.compile(r"(?:state )?node is nominated for a pending pod", _I)),
    (
        NO_NODE,
        re.compile(
            r"state node doesn't contain both a node and a nodeclaim|nodeclaim does not have an associated node",
            _I,
        ),
    ),
    (NOT_INITIALIZED, re.compile(r"(?:state )?node (?:isn't|is not) initialized", _I)),
    (
        DELETING,
        re.compile(r"(?:state )?node is (?:deleting or )?marked for deletion|candidate is deleting", _I),
    ),
    (ALREADY_DISRUPTING, re.compile(r"candidate is already being (?:deprovisioned|disrupted)", _I)),
    (
        NODE_ANNOTATION,
        re.compile(
            r'disruption is blocked through the "?karpenter\.sh/do-not-(?:disrupt|evict)"? annotation', _I
        ),
    ),
    (
        NOT_MANAGED,
        re.compile(
            r"(?:state )?node doesn't have (?:required label \"[^\"]*\"|the Karpenter owner label)"
            r"|node isn't managed by karpenter",
            _I,
        ),
    ),
    (
        NODEPOOL_MISSING,
        re.compile(r'nodepool "[^"]*" (?:can\'t be resolved for state node|not found)', _I),
    ),
    (
        INSTANCE_TYPE_UNKNOWN,
        re.compile(r'instance type "[^"]*" (?:can\'t be resolved|not found)', _I),
    ),
    (
        BUDGET,
        re.compile(r"No allowed disruptions(?: for disruption reason \w+)? due to blocking budget", _I),
    ),
    (
        UNCONSOLIDATABLE,
        re.compile(
            r"Can't replace with a cheaper node|Can't remove without creating [0-9]+ candidates"
            r'|NodePool "[^"]*" has (?:non-empty )?consolidation disabled'
            r"|SpotToSpotConsolidation (?:is disabled, can't replace a spot node with a spot node"
            r"|requires [0-9]+ cheaper instance type options[^.]*)"
            r'|Node does not have label "[^"]*"',
            _I,
        ),
    ),
)


def disruption_blocked(text: str) -> tuple[str, str, str | None] | None:
    """(blocker, the cause as printed, its ``Cannot disrupt <kind>:`` wrapper as printed)
    for a Karpenter disruption refusal in ``text``; None when there is none."""
    for blocker, regex in _CAUSES:
        match = regex.search(text)
        if match is not None:
            wrapper = _WRAPPER_RE.search(text, max(0, match.start() - 40), match.start())
            return blocker, match.group(0), wrapper.group(0).strip() if wrapper is not None else None
    return None
