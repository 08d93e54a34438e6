"""Text pasted from a terminal pane (k9s, tmux, screen, a box around one column) back to
the line it was before the pane wrapped it.

A pane is a run of rows of one column of text, with or without a border on either side
(``│``, ``┃``, ``║``, ``|``) and one space of padding inside it. It wraps in one of two ways:

- **hard wrap** (tmux, screen, a terminal): every row but the last is full, and a wrap
  inside a word leaves no space on either side of the break. With the right border kept
  the rows' widths are exact and that is certain; without it (copy mode strips trailing
  spaces) a row one column short lost a space at its end, a full row was cut inside a
  token.
- **word wrap** (tview's word-wrapping text views, ``fold -s``): rows end at spaces, so a
  break is between words, unless the row had to be cut inside a long token.

Where the shape of the rows does not settle it, the scheduler's vocabulary does: the
words of every phrase the parsers know (analyzers.messages.reasons' catalogue and the
phrases below, taken from the parsers' own upstream texts). Two fragments are joined
when together they spell a known word and neither is one alone (``No p`` /
``reemption``); never from a guess about English. What no vocabulary knows (a pod, node
or taint name cut by a word wrap that also filled its row) is joined only where the
row's shape says it was cut.

Multi-column tables (a border or ``|`` inside a row) are analyzers.messages.text's.
"""

from __future__ import annotations

import itertools
import re
from functools import cache
from typing import Final

from analyzers.messages.reasons import CATALOGUE

_BORDERS: Final = "|│┃║╎╏┆┇┊┋"
_BOX_CHARS: Final = "".join(chr(c) for c in range(0x2500, 0x2580))
_RULE_RE: Final = re.compile(r"[\s" + _BOX_CHARS + r"+|=:-]*")
_RULE_CHAR_RE: Final = re.compile(r"[" + _BOX_CHARS + r"+=-]")
# The narrowest pane worth the name: a row that short is a line of its own, not a wrap.
MIN_WIDTH: Final = 40

# Phrases of the other parsers (their modules cite the upstream files): kube-scheduler's
# headers and free-form reasons, drain and eviction, the autoscalers, Kueue, the GPU schedulers.
PHRASES: Final = (
    "0/3 nodes are available: nodes are unavailable: all nodes are unavailable preemption:",
    "Insufficient cpu, memory, ephemeral-storage, pods, nvidia.com/gpu, amd.com/gpu, hugepages-1Gi",
    "hugepages-2Mi nvidia.com/mig-1g.5gb aws.amazon.com/neuron google.com/tpu gpu",
    "node(s) had untolerated taint {key: value} node(s) had volume node affinity conflict",
    "node(s) didn't satisfy plugin(s) node(s) had condition persistentvolumeclaim not found",
    "is being deleted bound to non-existent persistentvolume resourceclaim waiting for ephemeral",
    "volume controller to create the persistentvolumeclaim scheduling gates",
    "running PreFilter Filter PostFilter Reserve Permit PreBind Bind plugin",
    "no new claims to deallocate still not schedulable Error running PostFilter plugin failed",
    "fit failure summary on nodes pod failed to fit in any node No nodes are available that match",
    "all of the following predicates:: Node(s) failed PreFilter plugin",
    "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget",
    "needs healthy pods and has currently does not allow evicting pods because it failed sync",
    "is still being processed by the server This pod has more than one PodDisruptionBudget,",
    "which the eviction subresource does not support error when evicting pods/ will retry after",
    "evicting pod There are pending pods in node nodes to be drained: unable to drain node",
    "due to error: continuing command... aborting command... cannot delete",
    "Pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet",
    "(use --force to override) DaemonSet-managed Pods (use --ignore-daemonsets to ignore)",
    "Pods with local storage (use --delete-emptydir-data to override) --delete-local-data",
    "Pods that declare no controller",
    "The node was low on resource: The node had condition: Node didn't have enough resource:",
    "requested: used: capacity:",
    "pod didn't trigger scale-up (it wouldn't fit if a new node is added): pod triggered",
    "max node group size reached not ready for scale-up in backoff after failed scale-up",
    "Failed to schedule pod, Could not incompatible with nodepool provisioner daemonset overhead",
    "no instance type satisfied resources and requirements has enough resources did not tolerate",
    "Pod should schedule on: nodeclaim/ node/ machine/ Cannot disrupt deprovision Node:",
    "NodeClaim: Machine: state node is nominated for a pending pod doesn't contain both a",
    "and a nodeclaim isn't initialized is marked for deletion candidate already being disrupted",
    "deprovisioned does not have an associated Pdb prevents pod evictions PodDisruptionBudget=",
    "Eviction does not support multiple PDBs karpenter.sh/do-not-disrupt annotation",
    "No allowed disruptions for disruption reason due to blocking budget Can't replace with",
    "a cheaper node SpotToSpotConsolidation consolidation disabled",
    "couldn't assign flavors to pod set insufficient unused quota for in flavor more needed",
    "insufficient quota for previously considered podsets requests current podset request",
    "maximum capacity unavailable in ClusterQueue untolerated taint doesn't match node affinity",
    "Pending the preemption of workload(s) topology allows to fit only out of pod(s) slice(s)",
    "doesn't allow to fit any of LocalQueue doesn't exist is inactive",
    "no nodes with enough resources were found node(s) didn't have enough resources: GPUs",
    "GPU memory CPU cores of mig profile Resources were found for pods while are required",
    "for gang scheduling. Additional cannot be scheduled due to: from all sub-groups",
    "sub-group requires in this Unable to schedule podgroup Not enough resources the workload",
    "tasks in gang unschedulable: pod group is not ready, Pending, Running, minAvailable;",
    "Unschedulable. Origin reason is no available node, do not meet all node scores",
    "CardInsufficientMemory CardInsufficientCore NodeInsufficientDevice CardTypeMismatch",
    "Warning Normal FailedScheduling DisruptionBlocked Unconsolidatable default-scheduler",
    # kube-scheduler's plugins, as PreFilter/Filter errors and "didn't satisfy plugin(s) [...]" name them
    "NodeResourcesFit NodeAffinity TaintToleration NodeUnschedulable NodeName NodePorts InterPodAffinity",
    "PodTopologySpread VolumeBinding VolumeZone VolumeRestrictions NodeVolumeLimits SchedulingGates",
    "DynamicResources DefaultPreemption PrioritySort DefaultBinder ImageLocality NodeResourcesBalancedAllocation",
    "EBSLimits GCEPDLimits AzureDiskLimits CinderLimits",
)
# A count or a header's "0/N": in every format a word follows it after a space.
_COUNT_RE: Final = re.compile(r"[0-9]{1,9}(?:/[0-9]{1,9})?")
_EDGE: Final = ".,;:\"'`[]{}"
# Characters that join the parts of one name (a cut next to one is inside the name; a
# full stop ending a row is a sentence's as often, so only one that starts a row counts).
_JOINERS: Final = ".-/_="


def _norm(token: str) -> str:
    return token.lower().strip(_EDGE)


@cache
def vocabulary() -> frozenset[str]:
    """Every word of every phrase the parsers know, normalised (lower case, without the
    punctuation that clings to a word's ends)."""
    words: set[str] = set()
    for text in (*(entry[0] for entry in CATALOGUE), *PHRASES):
        for token in text.split():
            word = _norm(token)
            if word:
                words.add(word)
    words.discard("")
    return frozenset(words)


def known(token: str) -> bool:
    return _norm(token) in vocabulary()


def _glued_known(a: str, b: str) -> bool:
    """``a`` + ``b`` is a known word, each side holding part of it (not only punctuation)."""
    return bool(a.strip(_EDGE)) and bool(b.strip(_EDGE)) and known(a + b)


def _spells_a_known_word(left: str, right: str) -> bool:
    """``left`` + ``right`` spell a known word, and neither is one alone."""
    a = left.split()[-1] if left.split() else ""
    b = right.split()[0] if right.split() else ""
    if not a or not b:
        return False
    return _glued_known(a, b) and not known(a) and not known(b)


def join_wrapped(previous: str, following: str) -> bool:
    """Whether ``previous`` and ``following`` (two lines of a paste, neither in a pane
    shape) were one word that a word wrap split: only when they spell a known word."""
    if not previous or not following or previous[-1].isspace() or following[0].isspace():
        return False
    return _spells_a_known_word(previous, following)


def _strip_borders(lines: list[str]) -> tuple[list[str], bool, bool] | None:
    """The rows inside a one-column pane's borders, and whether their widths are exact
    (a right border kept every row's width), and whether their padding was certain; None
    when ``lines`` are not such a pane."""
    indent = min(len(line) - len(line.lstrip()) for line in lines)
    rows = [line[indent:] for line in lines]
    left = all(row[:1] in _BORDERS and row[:1] != "" for row in rows)
    if left:
        rows = [row[1:] for row in rows]
    stripped = [row.rstrip() for row in rows]
    right = all(row[-1:] in _BORDERS and row[-1:] != "" for row in stripped)
    exact = False
    if right:
        exact = len({len(row) for row in stripped}) == 1
        rows = [row[:-1] for row in stripped]
    if any(ch in _BOX_CHARS for row in rows for ch in row) or any(" | " in row for row in rows):
        return None  # a table of several columns
    # One space of padding inside the borders (k9s, boxes) pads both sides; a pane's divider
    # (tmux) pads neither: a space on the right alone is the text's own.
    padded = (left or right) and all(row.startswith(" ") for row in rows)
    if padded:
        rows = [row[1:] for row in rows]
    # With no left border, a space ending every row is the right border's padding, or (in a
    # short pane) the text's own: the rows are exact but a cut there is the vocabulary's call.
    certain = True
    if right and exact and (padded or not left) and all(row.endswith(" ") for row in rows):
        rows = [row[:-1] for row in rows]
        certain = padded
    if not (left or right):
        rows = stripped
    return rows, exact, certain


def unframe(text: str) -> str | None:
    """``text`` as one line when it is a wrapped one-column pane; None when it is not."""
    lines = [line for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if _RULE_CHAR_RE.search(line) is None or _RULE_RE.fullmatch(line) is None]
    if len(lines) < 2:
        return None
    framed = _strip_borders(lines)
    if framed is None:
        return None
    rows, exact, certain = framed
    bordered = any(line.lstrip()[:1] in _BORDERS for line in lines) or any(
        line.rstrip()[-1:] in _BORDERS for line in lines
    )
    if not exact:
        rows = [row.rstrip() for row in rows]
    width = max(len(row) for row in rows)
    if width < MIN_WIDTH:
        return None
    # Hard-wrapped: every row but the last fills the width (or did, before its trailing space
    # was stripped).
    # (With exact widths: no row but the last ends in padding, i.e. two or more spaces.)
    if exact:
        hard = all(not row.endswith("  ") for row in rows[:-1])
    else:
        # (A shorter row that ends a sentence or a clause ends one of the message's own
        # lines: KAI-Scheduler's histogram is several.)
        hard = any(len(row) >= width - 1 for row in rows[:-1]) and all(
            len(row) >= width - 1 or row.endswith((".", ":", ";")) for row in rows[:-1]
        )
    # (A hard wrap leaves at most one space at a row's start; more is an indentation.)
    if not bordered and (not hard or any(line[:2].isspace() for line in lines[1:])):
        return (
            None  # plain lines of a paste (indented: kubectl describe's): analyzers.messages.text joins them
        )
    out = rows[0]
    for previous, row in itertools.pairwise(rows):
        out += _joint(previous, row, width, exact=exact, hard=hard, certain=certain) + row
    return out


def _whole_word(token: str, *, counts: bool = False) -> bool:
    """A known word or a count standing alone: not the start of a taint ``{key`` or a
    bracketed list, which continues with a name the vocabulary cannot know."""
    if token[:1] in "{[":
        return False
    if counts and _COUNT_RE.fullmatch(token.rstrip(",.:;")) is not None:
        return True
    return len(token.strip(_EDGE)) >= 2 and known(token)  # a lone letter is too weak: "a" / "100" is a100


def _camel_junction(a: str, b: str) -> bool:
    """``a`` and ``b`` join as one CamelCase name (``Failed`` + ``PostFilter``): a word
    with a capital ending in a lower-case letter, then a capital."""
    return a.isalpha() and any(c.isupper() for c in a) and a[-1].islower() and b[:1].isupper()


def _surely_between_words(a: str, b: str) -> bool:
    """Both sides whole words the parsers know that together are none, a list's comma, a
    clause's ``;`` or a label's ``:`` before a word, or a word before ``[``/``{``: a word
    wrap, not a cut."""
    if _glued_known(a, b) or not b.strip(_EDGE):
        return False  # (punctuation alone on the next row ends the word before it)
    return (
        # (not a CamelCase junction: "Failed" + "PostFilter" is one plugin's name)
        (_whole_word(a, counts=True) and known(b) and not _camel_junction(a, b))
        or (a[-1] in ",;:" and b[0] not in "\"'{[")
        or (b[0] in "[{" and a[-1].isalnum())  # a list or taint opens after a space in every format
        or b.startswith("--")  # a flag: "(use" / "--force"
        or (a[-1] == "." and (b[0].isupper() or known(b)))  # a sentence ends
        or (
            a.isalpha() and a.islower() and _whole_word(a) and b[0].isupper()
        )  # "plugin" / "FailedPostFilter"
        or (a.isalpha() and _whole_word(a) and b.endswith(":"))  # a word, then a name's label: "is" / "w-0:"
    )


def _between_words(a: str, b: str) -> bool | None:
    """Whether a cut between tokens ``a`` and ``b`` fell between two words (True), inside
    one (False), or cannot be told from the vocabulary and the formats' punctuation (None)."""
    if _glued_known(a, b) or not b.strip(_EDGE):
        return False
    if a[-1] in ",;:" and b[0] not in "\"'{[":
        return True  # every format follows a list's comma, a clause's ";" and a label's ":" with a space
    if b.startswith("--"):
        return True  # a flag: "(use" / "--force to override)"
    if a[-1] in _JOINERS[1:] or b[0] in _JOINERS:
        return False  # inside a name: "gpu-" / "node-1", "nvidia" / ".com/gpu"
    if _camel_junction(a, b):
        return False
    if _whole_word(a) or known(b):
        return True  # a known word on either side: the wrap was between words
    return None


def _joint(previous: str, row: str, width: int, *, exact: bool, hard: bool, certain: bool = True) -> str:
    """What goes between two rows: "" (one token cut by the wrap) or " "."""
    if not previous or not row or row[0].isspace() or previous[-1].isspace():
        return "" if exact else " "
    if previous[-1] == "-" and previous[-2:-1].isalnum() and row[0].isalnum():
        return ""  # a break after a hyphen: "anti-" / "affinity", "ephemeral-" / "storage"
    a, b = previous.split()[-1], row.split()[0]
    full = len(previous) == width
    if not full:
        # Exact widths: a wrap between words. Trimmed rows: one short lost its trailing space.
        return "" if not hard and _spells_a_known_word(previous, row) else " "
    if exact and hard and certain:
        # A hard wrap inside a token (a space between words would be in a row), unless both
        # sides are whole words the parsers know and together are none: a word wrap that
        # filled its row.
        return " " if _surely_between_words(a, b) else ""
    between = _between_words(a, b)
    if between is None:
        between = not hard  # unknown tokens: a hard wrap cuts anywhere, a word wrap between words
    return " " if between else ""
