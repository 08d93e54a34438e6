"""Parsers for the messages Kubernetes prints when a pod cannot be placed or evicted.

``parse_message(text)`` takes anything a user pastes (a FailedScheduling event
of any kube-scheduler version, whole or in pieces, a PodScheduled condition
message, cluster-autoscaler's and Karpenter's words about a pod, Kueue's about
a Workload, an eviction
refusal from kubectl drain, an autoscaler, the descheduler or the VPA, a kubelet
rejection) and returns a ``ParsedMessage``; ``classify_reason(text)`` maps
one per-node reason to the code and plugin the filter simulator uses too.
Pure and synchronous: no I/O, no clock.
"""

from analyzers.messages.autoscaler import parse_autoscaler
from analyzers.messages.eviction import (
    DISRUPTION_BLOCKED,
    DO_NOT_DISRUPT,
    DRAIN_REFUSED,
    KUBELET_ADMISSION,
    MULTIPLE_PDBS,
    NODE_CONDITION,
    NODE_PRESSURE,
    PDB_VIOLATION,
    Eviction,
    parse_eviction,
)
from analyzers.messages.model import (
    AUTOSCALER,
    EVICTION,
    QUEUE,
    SCHEDULER_ERROR,
    SCHEDULING,
    UNKNOWN,
    ParsedMessage,
    Preemption,
    Reason,
)
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
    "AUTOSCALER",
    "DISRUPTION_BLOCKED",
    "DO_NOT_DISRUPT",
    "DRAIN_REFUSED",
    "EVICTION",
    "KUBELET_ADMISSION",
    "MULTIPLE_PDBS",
    "NODE_CONDITION",
    "NODE_PRESSURE",
    "PDB_VIOLATION",
    "QUEUE",
    "SCHEDULER_ERROR",
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
    "parse_autoscaler",
    "parse_eviction",
    "parse_message",
    "parse_message_uncached",
    "parse_reason_list",
    "parse_scheduling",
]
