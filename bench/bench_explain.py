"""Benchmark of the message parser behind ``unstick explain``.

    .venv/bin/python bench/bench_explain.py [--messages 60000] [--stream 300000] [--seed 7]

Generates distinct, realistic messages (every kube-scheduler layout, kubectl
event columns, line wraps, eviction and drain errors), then prints:

- distinct: messages/second of ``parse_message_uncached`` (no message cache) over
  all of them, once with the parser's inner caches (reason classifier, shared
  Reason values, preemption parts) emptied first and once warm;
- cached: messages/second of ``parse_message`` (the lru_cache) on a Zipf stream
  drawn from the same messages, starting from an empty cache, and the hit rate;
- hits: messages/second when every message is already cached.

Target: >= 50,000 distinct messages/second on one core.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analyzers.messages import clear_all_caches, parse_message, parse_message_uncached
from analyzers.messages.scheduling import format_fit_error, format_preemption

RESOURCES = (
    "cpu",
    "memory",
    "ephemeral-storage",
    "nvidia.com/gpu",
    "amd.com/gpu",
    "hugepages-2Mi",
    "hugepages-1Gi",
    "example.com/foo",
    "aws.amazon.com/neuron",
    "pods",
)
TAINT_KEYS = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/disk-pressure",
    "node.cloudprovider.kubernetes.io/uninitialized",
    "dedicated",
    "gpu",
    "CriticalAddonsOnly",
    "karpenter.sh/disruption",
    "spot",
)
TAINT_VALUES = ("", "", "true", "gpu", "infra", "batch", "memory", "NoSchedule-team")
FIXED = (
    "node(s) didn't match Pod's node affinity/selector",
    "node(s) were unschedulable",
    "node(s) didn't match pod anti-affinity rules",
    "node(s) didn't satisfy existing pods anti-affinity rules",
    "node(s) didn't match pod affinity rules",
    "node(s) didn't match pod topology spread constraints",
    "node(s) had volume node affinity conflict",
    "node(s) didn't find available persistent volumes to bind",
    "node(s) didn't have free ports for the requested pod ports",
    "node(s) exceed max volume count",
    "node(s) had no available volume zone",
    "Too many pods",
    "cannot allocate all claims",
    "node(s) had untolerated taint(s)",
)
PREEMPT = ("No preemption victims found for incoming pod", "Preemption is not helpful for scheduling")
PREFILTER = (
    "pod has unbound immediate PersistentVolumeClaims",
    'persistentvolumeclaim "data-{n}" not found',
    "waiting for scheduling gates: [gate-{n}]",
)
LEGACY_NAMES = (
    "MatchNodeSelector",
    "PodToleratesNodeTaints",
    "CheckNodeUnschedulable",
    "NoVolumeZoneConflict",
    "MatchInterPodAffinity",
    "PodFitsHostPorts",
    "CheckNodeMemoryPressure",
    "NoDiskConflict",
)
AGES = ("3m", "10m", "2d", "45s", "6h59m")


def _taint(rng: random.Random, era: int) -> str:
    key, value = rng.choice(TAINT_KEYS), rng.choice(TAINT_VALUES)
    if era == 0:
        return f"node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    cuts = sorted(rng.sample(range(1, total), parts - 1)) if parts > 1 and total > parts else []
    bounds = [0, *cuts, total]
    counts = [b - a for a, b in itertools.pairwise(bounds)]
    return [c for c in counts if c > 0] or [total]


def scheduling_message(rng: random.Random, i: int) -> str:
    total = rng.randint(1, 5000)
    era = rng.randrange(3)  # 0: 1.18-1.23 taints, 1: 1.24-1.2x, 2: newest
    kinds: list[str] = []
    for _ in range(rng.randint(1, 4)):
        pick = rng.random()
        if pick < 0.35:
            kinds.append(f"Insufficient {rng.choice(RESOURCES)}")
        elif pick < 0.6:
            kinds.append(_taint(rng, era) if era < 2 else "node(s) had untolerated taint(s)")
        else:
            kinds.append(rng.choice(FIXED))
    kinds = list(dict.fromkeys(kinds))
    counts = _split(rng, total, len(kinds))
    reasons = list(zip(kinds, counts, strict=False))
    post = ""
    roll = rng.random()
    if roll < 0.55:
        pre = [(rng.choice(PREEMPT), c) for c in _split(rng, total, rng.randint(1, 2))]
        merged: dict[str, int] = {}
        for text, c in pre:
            merged[text] = merged.get(text, 0) + c
        post = format_preemption(total, merged)
        if era == 1 and rng.random() < 0.3:
            post += "."  # the ".." of 1.26-1.28
        if rng.random() < 0.15:
            post = "no new claims to deallocate, " + post
    elif roll < 0.65:
        post = "preemption: not eligible due to preemptionPolicy=Never."
    if rng.random() < 0.08:
        message = format_fit_error(
            total, prefilter_msg=rng.choice(PREFILTER).format(n=i % 997), postfilter_msg=post
        )
    else:
        message = format_fit_error(total, reasons, postfilter_msg=post)
    wrap = rng.random()
    if wrap < 0.25:
        age = rng.choice(AGES)
        message = f"  Warning  FailedScheduling  {age} (x{rng.randint(2, 400)} over {age})  default-scheduler  {message}"
    elif wrap < 0.35:
        message = message.replace(", ", ",\n                           ")
    elif wrap < 0.45:
        message = f"{rng.randint(1, 59)}m  Warning  FailedScheduling  pod/web-{i}  {message}"
    return message


def legacy_message(rng: random.Random, i: int) -> str:
    names = rng.sample(LEGACY_NAMES, rng.randint(1, 3))
    if rng.random() < 0.5:
        items = ", ".join(sorted(f"{n} ({rng.randint(1, 99)})" for n in names))
        return f"No nodes are available that match all of the following predicates:: Insufficient cpu ({i % 50 + 1}), {items}."
    counts = ", ".join(sorted(f"{rng.randint(1, 99)} {n}" for n in names))
    return f"0/{rng.randint(100, 999)} nodes are available: {i % 50 + 1} Insufficient memory, {counts}."


def eviction_message(rng: random.Random, i: int) -> str:
    pod, ns, pdb = f"web-{i}", rng.choice(("shop", "default", "kube-system", "data")), f"pdb-{i % 300}"
    roll = rng.random()
    if roll < 0.4:
        return (
            f'error when evicting pods/"{pod}" -n "{ns}" (will retry after 5s): '
            "Cannot evict pod as it would violate the pod's disruption budget."
        )
    if roll < 0.6:
        return f'error when evicting pod "{pod}" (will retry after 5s): Cannot evict pod as it would violate the pod\'s disruption budget.'
    if roll < 0.8:
        return (
            f'evicting pod {ns}/{pod}\nerror when evicting pods/"{pod}" -n "{ns}" (will retry after 5s): '
            f"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {pdb} "
            f"needs {rng.randint(1, 9)} healthy pods and has {rng.randint(1, 9)} currently"
        )
    return f'error when evicting pods/"{pod}" -n "{ns}": This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.'


def generate(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    i = 0
    while len(out) < count:
        i += 1
        roll = rng.random()
        if roll < 0.85:
            message = scheduling_message(rng, i)
        elif roll < 0.92:
            message = legacy_message(rng, i)
        else:
            message = eviction_message(rng, i)
        if message not in seen:
            seen.add(message)
            out.append(message)
    return out


class Timer:
    """Wall time and this process's CPU time: on a shared machine the CPU time is
    the cost on one core, the wall time includes waiting for it."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def rate(self, count: int) -> str:
        return (
            f"{count / self.cpu:>12,.0f} msg/s per core ({self.cpu / count * 1e6:6.2f} µs CPU/msg; "
            f"wall {count / self.wall:,.0f} msg/s)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--stream", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    messages = generate(args.messages, args.seed)
    print(
        f"{len(messages):,} distinct messages generated "
        f"(mean {sum(map(len, messages)) / len(messages):.0f} chars)"
    )
    gc.collect()
    gc.disable()
    try:
        clear_all_caches()
        with Timer() as cold:
            for message in messages:
                parse_message_uncached(message)
        print(f"distinct, inner caches cold: {cold.rate(len(messages))}")

        with Timer() as warm:
            for message in messages:
                parse_message_uncached(message)
        print(f"distinct, inner caches warm: {warm.rate(len(messages))}")

        rng = random.Random(args.seed + 1)
        weights = [1 / (rank + 1) ** 1.1 for rank in range(len(messages))]
        stream = rng.choices(messages, weights=weights, k=args.stream)
        clear_all_caches()
        with Timer() as zipf:
            for message in stream:
                parse_message(message)
        info = parse_message.cache_info()
        hit_rate = info.hits / (info.hits + info.misses)
        print(f"Zipf stream, empty caches:   {zipf.rate(len(stream))}, hit rate {hit_rate:.1%}")

        hot = messages[:1000]
        for message in hot:
            parse_message(message)
        with Timer() as hits:
            for _ in range(100):
                for message in hot:
                    parse_message(message)
        print(f"cache hits only:             {hits.rate(100 * len(hot))}")
    finally:
        gc.enable()
    distinct = len(messages) / cold.cpu
    verdict = "met" if distinct >= 50_000 else "NOT met"
    print(f"target >= 50,000 distinct msg/s per core: {verdict} ({distinct:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
