"""kube-scheduler's message layout: FitError.Error() in
pkg/scheduler/framework/types.go (and the preemption FitError built in
pkg/scheduler/framework/preemption/preemption.go).

``0/N nodes are available: <PreFilter message>.`` or ``0/N nodes are available:
<count> <reason>, ... .`` -- each ``"<count> <reason>"`` string sorted as Go's
sort.Strings sorts them (byte order, so ``10 ...`` before ``9 ...``) -- then
`` <PostFilter message>`` (1.26-1.28: `` <PostFilter message>.``, hence ``..``).
"""

from __future__ import annotations

from collections.abc import Mapping

from analyzers.simulator.versions import Wording

NO_NODES = "no nodes available to schedule pods"  # ErrNoNodesAvailable (schedule_one.go)
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
DRA_NO_CLAIMS = "no new claims to deallocate"
DRA_STILL_NOT_SCHEDULABLE = "still not schedulable"  # a pod with claims, none deallocated
DRA_DEALLOCATED = "deallocation of ResourceClaim completed"
# preemption.go Evaluator.Preempt (1.37+): the candidate DefaultPreemption chose.
PLACEMENT_FOUND = "found a potential placement for pod on node {node}, preempting {victims} victims"
# kube-scheduler/framework cycle_state.go ErrNotFound: DynamicResources' PostFilter found
# no state of its PreFilter (see versions.py).
DRA_STATE_NOT_FOUND = "not found"


def histogram(reasons: Mapping[str, int]) -> str:
    """``"<count> <reason>"`` strings, sorted by bytes, joined by ``", "``."""
    items = sorted(f"{count} {reason}" for reason, count in reasons.items() if count > 0)
    return ", ".join(items)


def fit_error(
    total: int,
    wording: Wording,
    *,
    reasons: Mapping[str, int],
    prefilter: tuple[str, ...] = (),
    postfilter: str = "",
) -> str:
    if total == 0:
        return NO_NODES
    msg = f"0/{total} nodes are available:"
    if prefilter and not wording.prefilter_counted:
        msg += f" {', '.join(prefilter)}."
    else:
        body = histogram(reasons)
        if body:
            msg += f" {body}."
    if postfilter:
        msg += f" {postfilter}." if wording.double_dot else f" {postfilter}"
    return msg


def preemption_fit_error(total: int, reasons: Mapping[str, int]) -> str:
    """The message of the FitError DefaultPreemption builds when no node can be freed."""
    return f"0/{total} nodes are available: {histogram(reasons)}."
