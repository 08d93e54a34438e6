"""Fixtures of the real-control-plane tier (marker ``realcluster``).

``control_plane`` (session): builds or reuses the binaries (tests/realcluster/build.sh)
and starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the fake
kubelet. It fails, with the logs' tails, when any of that goes wrong: a test that
needs the real control plane is never skipped.

Nodes are cluster-scoped, so tests that shape the cluster use ``cluster.nodes(...)``
which replaces every Node with the given ones and waits until the scheduler sees
exactly them; tests run one at a time (the tier is not run under xdist).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.harness import ApiError, ControlPlane, ControlPlaneError, build_binaries


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    with running_control_plane() as plane:
        yield plane


@contextlib.contextmanager
def running_control_plane(**options: Any) -> Iterator[ControlPlane]:
    """A started control plane with :class:`ControlPlane`'s keyword options
    (``scheduler_config``, ``extra_controllers``, ``feature_gates``, ``runtime_config``),
    stopped on exit. For a module's own fixture when the session's default plane will not do::

        @pytest.fixture(scope="module")
        def dra_plane() -> Iterator[ControlPlane]:
            with running_control_plane(extra_controllers=("resourceclaim-controller",)) as plane:
                yield plane
    """
    work = Path(tempfile.mkdtemp(prefix="unstick-kube-"))
    try:
        bin_dir = build_binaries(work)
        plane = ControlPlane(bin_dir=bin_dir, work=work, **options)
        try:
            plane.start()
        except Exception as exc:
            tails = plane.log_tails(40)
            plane.stop()
            raise ControlPlaneError(f"the real control plane did not start: {exc}\n{tails}") from exc
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    print(f"\nreal control plane {plane.server} ready in {plane.started_in:.1f} s (logs in {work})")
    try:
        yield plane
    finally:
        plane.stop()
        if not os.environ.get("UNSTICK_KEEP_KUBE_LOGS"):
            import shutil

            shutil.rmtree(work, ignore_errors=True)


class Cluster:
    """One test's view of the control plane: its namespace and the Nodes it set."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.api = plane.api
        self.ns = namespace

    def nodes(self, nodes: list[dict[str, Any]]) -> None:
        """Make ``nodes`` the cluster's only Nodes and wait until kube-scheduler counts them."""
        wanted = {n["metadata"]["name"] for n in nodes}
        for existing in self.plane.all_nodes():
            if existing["metadata"]["name"] not in wanted:
                self.api.delete(f"/api/v1/nodes/{existing['metadata']['name']}")
        for n in nodes:
            try:
                self.api.create(n)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                self.api.delete(f"/api/v1/nodes/{n['metadata']['name']}")
                self.api.create(n)
        self.sync_scheduler(len(nodes))

    def sync_scheduler(self, count: int) -> None:
        """Wait until kube-scheduler's node cache holds ``count`` nodes: a pod no node can
        take is rejected with ``0/<count> nodes are available``. Node and pod informers are
        separate streams, so without this a test's first pod could race its Nodes."""
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "sync-", "namespace": self.ns},
            "spec": {
                "nodeSelector": {"unstick.test/sync": "nowhere"},
                "containers": [{"name": "c", "image": "x"}],
            },
        }
        deadline = time.monotonic() + 30
        want = f"0/{count} nodes are available" if count else "no nodes available to schedule pods"
        last = ""
        while time.monotonic() < deadline:
            created = self.api.create(probe)
            name = created["metadata"]["name"]
            pod = self.api.wait_for(
                f"/api/v1/namespaces/{self.ns}/pods?fieldSelector=metadata.name%3D{name}",
                lambda p: scheduled_condition(p) is not None,
                timeout=20,
                what="the scheduler's sync probe",
            )
            self.api.delete(f"/api/v1/namespaces/{self.ns}/pods/{name}", grace=0)
            last = (scheduled_condition(pod) or {}).get("message", "")
            if last.startswith(want):
                return
        raise AssertionError(f"kube-scheduler does not see {count} nodes: last verdict {last!r}")


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return None


@pytest.fixture
def cluster(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A fresh namespace (named after the test) on the session's control plane."""
    control_plane.check_alive()
    prefix = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_"))[:40].strip("-")
    name = control_plane.new_namespace(prefix or "test")
    try:
        yield Cluster(control_plane, name)
    finally:
        control_plane.delete_namespace(name)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The differential run's figures, at the end of the test run."""
    from tests.realcluster.stats import DIFFERENTIAL as stats

    if stats.get("cases"):
        terminalreporter.write_line(
            f"real-scheduler differential: seed {stats['seed']}, {stats['cases']} cases, "
            f"{stats['agree']} agreements, {stats['seconds']:.1f} s (disagreements recorded in {stats['record_dir']})"
        )
        if stats.get("known_refusals"):
            terminalreporter.write_line(
                f"real-scheduler differential: {stats['known_refusals']} remedies refused by the API server "
                "were known bugs (tests/realcluster/verdicts.py KNOWN_REFUSALS; listed in the output above)"
            )
