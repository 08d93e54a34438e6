"""The test oracle of placement: the slow path placement took before it was made
incremental -- every replica bound into a new what-if snapshot (``bind``) and the
whole attempt (every filter on every node, then the Score phase) run again, per
replica and per tie branch. Not used by the product; tests/simulator/
test_placement_incremental.py checks that ``place`` gives exactly its answers."""

from __future__ import annotations

import random

from analyzers.records import Pod
from analyzers.simulator.scoring.placement import (
    MAX_STATES,
    SAMPLES,
    Placement,
    Step,
    attempt,
    bind,
    estimate,
)
from analyzers.simulator.scoring.profile import Profile
from analyzers.snapshot import ClusterSnapshot

State = tuple[float, ClusterSnapshot, Step]


def reference_place(
    snapshot: ClusterSnapshot, pod: Pod, replicas: int, profile: Profile, kube_version: str, seed: int = 0
) -> Placement:
    first = attempt(snapshot, pod, profile, kube_version=kube_version)

    def after(snap: ClusterSnapshot) -> Step:
        return attempt(snap, pod, profile, kube_version=kube_version, rows=False)

    def first_branch() -> list[tuple[str, ...]]:
        steps: list[tuple[str, ...]] = []
        snap, step = snapshot, first
        for k in range(1, replicas + 1):
            if not step.top:
                break
            steps.append(step.top)
            if k == replicas:
                break
            snap = bind(snap, pod, step.top[0], k)
            step = after(snap)
        return steps

    def sampled() -> Placement:
        rng = random.Random(seed)
        runs: list[dict[str, int]] = []
        for _ in range(SAMPLES):
            snap, step = snapshot, first
            counts: dict[str, int] = {}
            for k in range(1, replicas + 1):
                if not step.top:
                    break
                node = rng.choice(step.top)
                counts[node] = counts.get(node, 0) + 1
                if k < replicas:
                    snap = bind(snap, pod, node, k)
                    step = after(snap)
            runs.append(counts)
        dist, exact, err = estimate(runs)
        return Placement(first, tuple(first_branch()), dist, exact, err)

    steps: list[tuple[str, ...]] = []
    branch: tuple[str, ...] = ()
    states: dict[tuple[str, ...], State] = {(): (1.0, snapshot, first)}
    for k in range(1, replicas + 1):
        on_branch = states.get(branch)
        if on_branch is not None and on_branch[2].top:
            steps.append(on_branch[2].top)
            branch = tuple(sorted((*branch, on_branch[2].top[0])))
        if k < replicas and sum(max(1, len(st.top)) for _, _, st in states.values()) > MAX_STATES:
            return sampled()
        nxt: dict[tuple[str, ...], tuple[float, ClusterSnapshot, Step | None]] = {}
        for chosen, (p, snap, step) in states.items():
            if not step.top:
                old = nxt.get(chosen)
                nxt[chosen] = (p + (old[0] if old else 0.0), snap, step)
                continue
            share = p / len(step.top)
            for node in step.top:
                key = tuple(sorted((*chosen, node)))
                found = nxt.get(key)
                if found is not None:
                    nxt[key] = (found[0] + share, found[1], found[2])
                else:
                    nxt[key] = (share, bind(snap, pod, node, k), None)
            if len(nxt) > MAX_STATES:
                return sampled()
        states = {}
        for key, (p, snap, maybe) in nxt.items():
            states[key] = (p, snap, maybe if maybe is not None else (after(snap) if k < replicas else first))
    dist: dict[str, float] = {}
    for chosen, (p, _, _) in states.items():
        for node in chosen:
            dist[node] = dist.get(node, 0.0) + p
    return Placement(first, tuple(steps), {n: round(v, 6) for n, v in sorted(dist.items())}, True, {})
