"""Root-cause rules: one module per rule, listed in ``RULES``.

A rule module defines ``RULE_ID`` (a contract: stored, shown to users, never
renamed) and ``analyze(ctx: RuleContext) -> list[Finding]``. ``RULES`` is the
one explicit table, in precedence order: when two pending-pod rules explain the
same pod, the earlier rule's finding keeps it (a rollout deadlock is a better
answer than "insufficient GPU" for the same pod).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from analyzers.findings import Finding
from analyzers.rules.context import RuleContext, Thresholds

log = logging.getLogger(__name__)

Analyze = Callable[[RuleContext], list[Finding]]


@dataclass(frozen=True, slots=True)
class Rule:
    rule_id: str
    analyze: Analyze
    # Pending-pod rules compete for pods; see the module docstring.
    claims_pods: bool = True


def _rules() -> tuple[Rule, ...]:
    from analyzers.rules import (
        anti_affinity_infeasible,
        dra_devices_unavailable,
        insufficient_resources,
        node_selector_mismatch,
        other_scheduler,
        packing_profile,
        pdb_blocks_eviction,
        preference_outweighed,
        requests_missing_load_skew,
        rollout_surge_deadlock,
        scheduler_error,
        scheduler_silent,
        scheduling_gated,
        spread_not_honoured,
        topology_spread_infeasible,
        untolerated_taint,
        volume_binding,
    )

    return (
        Rule(rollout_surge_deadlock.RULE_ID, rollout_surge_deadlock.analyze),
        Rule(pdb_blocks_eviction.RULE_ID, pdb_blocks_eviction.analyze),
        Rule(scheduling_gated.RULE_ID, scheduling_gated.analyze),
        Rule(volume_binding.RULE_ID, volume_binding.analyze),
        Rule(requests_missing_load_skew.RULE_ID, requests_missing_load_skew.analyze, claims_pods=False),
        Rule(node_selector_mismatch.RULE_ID, node_selector_mismatch.analyze),
        Rule(untolerated_taint.RULE_ID, untolerated_taint.analyze),
        Rule(insufficient_resources.RULE_ID, insufficient_resources.analyze),
        Rule(anti_affinity_infeasible.RULE_ID, anti_affinity_infeasible.analyze),
        Rule(topology_spread_infeasible.RULE_ID, topology_spread_infeasible.analyze),
        Rule(dra_devices_unavailable.RULE_ID, dra_devices_unavailable.analyze),
        Rule(scheduler_error.RULE_ID, scheduler_error.analyze),
        Rule(other_scheduler.RULE_ID, other_scheduler.analyze),
        Rule(scheduler_silent.RULE_ID, scheduler_silent.analyze),
        # Score-phase findings: why a pod lands where it does (they explain, never claim, pods).
        Rule(preference_outweighed.RULE_ID, preference_outweighed.analyze, claims_pods=False),
        Rule(spread_not_honoured.RULE_ID, spread_not_honoured.analyze, claims_pods=False),
        Rule(packing_profile.RULE_ID, packing_profile.analyze, claims_pods=False),
    )


RULES: tuple[Rule, ...] = _rules()


@dataclass(frozen=True, slots=True)
class RuleError:
    rule_id: str
    error: str


@dataclass(frozen=True, slots=True)
class RuleRun:
    findings: tuple[Finding, ...]
    errors: tuple[RuleError, ...] = field(default=())


def run_rules(ctx: RuleContext, rules: Sequence[Rule] = RULES) -> RuleRun:
    """Run every rule; a failing rule is recorded and logged, never stops the others."""
    findings: list[Finding] = []
    errors: list[RuleError] = []
    claimed: set[str] = set()
    for rule in rules:
        try:
            produced = rule.analyze(ctx)
        except Exception as exc:  # one failing rule never stops the pipeline
            log.exception("rule failed", extra={"rule_id": rule.rule_id})
            errors.append(RuleError(rule.rule_id, f"{type(exc).__name__}: {exc}"))
            continue
        for finding in produced:
            if rule.claims_pods and finding.pods:
                remaining = tuple(p for p in finding.pods if p not in claimed)
                if not remaining:
                    continue
                if len(remaining) != len(finding.pods):
                    finding = replace(finding, pods=remaining)
                claimed.update(remaining)
            findings.append(finding)
    findings.sort(key=lambda f: (-f.severity.rank, f.rule_id, str(f.subject)))
    return RuleRun(tuple(findings), tuple(errors))


__all__ = ["RULES", "Rule", "RuleContext", "RuleError", "RuleRun", "Thresholds", "run_rules"]
