"""One entry point for any pasted message: scheduling failure, eviction failure or unknown."""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from analyzers.messages.autoscaler import parse_autoscaler
from analyzers.messages.eviction import OTHER, parse_disruption_blocked, parse_eviction
from analyzers.messages.gpu_schedulers import parse_gpu_scheduler
from analyzers.messages.kueue import parse_kueue
from analyzers.messages.model import EVICTION, UNKNOWN, ParsedMessage
from analyzers.messages.scheduler_errors import parse_scheduler_error
from analyzers.messages.scheduling import clear_caches, parse_headed, parse_reasons_only
from analyzers.messages.text import clean

CACHE_SIZE: Final = 32768


def parse_message_uncached(text: str) -> ParsedMessage:
    """Parse any text; never raises. ``parse_message`` is the cached variant."""
    cleaned = clean(text)
    parsed = (
        parse_gpu_scheduler(cleaned)
        or parse_headed(cleaned)
        or parse_autoscaler(cleaned)
        or parse_kueue(cleaned)
        or parse_scheduler_error(cleaned)
        or parse_reasons_only(cleaned)
    )
    if parsed is not None:
        return parsed
    eviction = parse_eviction(cleaned)
    if eviction is None or eviction.kind == OTHER:
        eviction = parse_disruption_blocked(cleaned) or eviction
    if eviction is not None:
        return ParsedMessage(kind=EVICTION, format="eviction", message=cleaned, eviction=eviction)
    return ParsedMessage(kind=UNKNOWN, format="unknown", message=cleaned)


@lru_cache(maxsize=CACHE_SIZE)
def parse_message(text: str) -> ParsedMessage:
    """Parse any text; never raises. Cached: a repeated message costs a dict lookup
    (parsed values are immutable, so sharing them is safe).

    Scheduling failures are recognised in every kube-scheduler layout since 1.2,
    anywhere in the text (event columns, log prefixes, table borders and line
    wraps do not matter), and in pieces (cut at either end); the verdicts of
    KAI-Scheduler, Volcano, HAMi and Kueue's topology-aware scheduling (``scheduler``
    names who spoke); then
    cluster-autoscaler's and Karpenter's messages about a pod, Kueue's about a
    Workload, kube-scheduler's plugin errors, a bare reason list,
    eviction and drain failures; anything else is ``unknown``.
    """
    return parse_message_uncached(text)


def clear_all_caches() -> None:
    """Empty every cache of the message parsers (for benchmarks and tests)."""
    parse_message.cache_clear()
    clear_caches()
