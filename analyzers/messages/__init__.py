"""Parsers for the messages Kubernetes prints when a pod cannot be placed or evicted.

``parse_message(text)`` takes anything a user pastes (a FailedScheduling event
of any kube-scheduler version, a PodScheduled condition message, a ``kubectl
drain`` error) and returns a ``ParsedMessage``; ``classify_reason(text)`` maps
one per-node reason to the code and plugin the filter simulator uses too.
Pure and synchronous: no I/O, no clock.
"""

from analyzers.messages.eviction import MULTIPLE_PDBS, PDB_VIOLATION, Eviction, parse_eviction
from analyzers.messages.model import EVICTION, SCHEDULING, UNKNOWN, ParsedMessage, Preemption, Reason
from analyzers.messages.parse import clear_all_caches, parse_message, parse_message_uncached
from analyzers.messages.reasons import ALL_CODES, ReasonInfo, Taint, classify_reason, describe
from analyzers.messages.scheduling import (
    format_fit_error,
    format_preemption,
    parse_reason_list,
    parse_scheduling,
)

__all__ = [
    "ALL_CODES",
    "EVICTION",
    "MULTIPLE_PDBS",
    "PDB_VIOLATION",
    "SCHEDULING",
    "UNKNOWN",
    "Eviction",
    "ParsedMessage",
    "Preemption",
    "Reason",
    "ReasonInfo",
    "Taint",
    "classify_reason",
    "clear_all_caches",
    "describe",
    "format_fit_error",
    "format_preemption",
    "parse_eviction",
    "parse_message",
    "parse_message_uncached",
    "parse_reason_list",
    "parse_scheduling",
]
