"""DynamicResources, simulated: PreEnqueue's claim holds (:mod:`.preenqueue`), the
DRA CEL environment (:mod:`.cel`), the structured allocator (:mod:`.allocator`) and
the plugin's PreFilter and Filter (:mod:`.plugin`)."""

from analyzers.simulator.dra.preenqueue import (
    DELETING,
    MISSING,
    NOT_CREATED,
    NOT_OWNED,
    ClaimHold,
    claim_hold,
    claim_names,
    unjudged_claims,
)

__all__ = [
    "DELETING",
    "MISSING",
    "NOT_CREATED",
    "NOT_OWNED",
    "ClaimHold",
    "claim_hold",
    "claim_names",
    "unjudged_claims",
]
