"""A fake kubelet for every Node of the test control plane (run as a process).

There are no real kubelets in the test cluster: Nodes are API objects the tests
create with the capacity, allocatable, labels and taints a scenario needs. This
process plays the kubelet's part of the API protocol for all of them:

- every Node gets a Lease in ``kube-node-lease`` renewed every few seconds and
  a ``Ready`` condition whose heartbeat time is refreshed (the node-status part
  of pkg/kubelet/kubelet_node_status.go, reduced to what the API shows);
- a pod bound to a node (by the real scheduler, or created with ``nodeName``)
  becomes Running and Ready, with container statuses (pkg/kubelet/status);
- a bound pod marked for deletion (graceful delete, eviction, namespace
  deletion) is deleted with grace period 0 at once, as a kubelet does once its
  containers are stopped.

Why not KWOK: it is one more Go build on a 2-core machine, and what the tests
need from a kubelet is these three API writes. Stdlib only (threads, urllib),
so it runs with any Python and never shares an event loop with the tests.

Usage: python fake_kubelet.py SERVER CA_FILE TOKEN
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any

LEASE_SECONDS = 40
RENEW_EVERY = 10.0


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Api:
    def __init__(self, server: str, ca_file: str, token: str) -> None:
        self.server = server.rstrip("/")
        self.ctx = ssl.create_default_context(cafile=ca_file)
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")

    def watch(self, path: str, rv: str):  # type: ignore[no-untyped-def]
        sep = "&" if "?" in path else "?"
        req = urllib.request.Request(
            f"{self.server}{path}{sep}watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=240"
        )
        req.add_header("Authorization", f"Bearer {self.token}")
        return urllib.request.urlopen(req, context=self.ctx, timeout=300)


def log(msg: str) -> None:
    print(f"{now_micro()} fake-kubelet: {msg}", flush=True)


class FakeKubelet:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.nodes: set[str] = set()
        self.lock = threading.Lock()

    # -- nodes ---------------------------------------------------------------------------------
    def node_seen(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        with self.lock:
            new = name not in self.nodes
            self.nodes.add(name)
        if new:
            self.heartbeat(name)

    def heartbeat(self, name: str) -> None:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now_micro()},
        }
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        try:
            self.api.request("PATCH", path, {"spec": lease["spec"]}, "application/merge-patch+json")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                try:
                    self.api.request(
                        "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease
                    )
                except urllib.error.HTTPError as exc2:
                    if exc2.code != 409:
                        log(f"lease {name}: {exc2.code}")
            elif exc.code != 409:
                log(f"lease {name}: {exc.code}")

    def heartbeats(self) -> None:
        while True:
            time.sleep(RENEW_EVERY)
            with self.lock:
                names = sorted(self.nodes)
            for name in names:
                patch = {
                    "status": {
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "KubeletReady",
                                "message": "kubelet is posting ready status",
                                "lastHeartbeatTime": now(),
                            }
                        ]
                    }
                }
                try:
                    self.api.request(
                        "PATCH",
                        f"/api/v1/nodes/{name}/status",
                        patch,
                        "application/strategic-merge-patch+json",
                    )
                except urllib.error.HTTPError as exc:
                    if exc.code == 404:  # the node is gone: no more heartbeats
                        with self.lock:
                            self.nodes.discard(name)
                        continue
                self.heartbeat(name)

    # -- pods ----------------------------------------------------------------------------------
    def pod_seen(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec", {})
        node = spec.get("nodeName")
        if not node:
            return
        ns, name = meta["namespace"], meta["name"]
        if meta.get("deletionTimestamp"):
            try:
                self.api.request(
                    "DELETE",
                    f"/api/v1/namespaces/{ns}/pods/{name}",
                    {
                        "kind": "DeleteOptions",
                        "apiVersion": "v1",
                        "gracePeriodSeconds": 0,
                        "preconditions": {"uid": meta["uid"]},
                    },
                )
            except urllib.error.HTTPError as exc:
                if exc.code not in (404, 409):
                    log(f"delete {ns}/{name}: {exc.code}")
            return
        status = pod.get("status", {})
        if status.get("phase") == "Running" or status.get("phase") in ("Succeeded", "Failed"):
            return
        started = now()
        containers = spec.get("containers", [])
        body = {
            "status": {
                "phase": "Running",
                "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}],
                "podIP": "10.244.0.1",
                "podIPs": [{"ip": "10.244.0.1"}],
                "startTime": started,
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": started}
                    for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
                ],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": "",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": started}},
                    }
                    for c in containers
                ],
            }
        }
        try:
            self.api.request(
                "PATCH",
                f"/api/v1/namespaces/{ns}/pods/{name}/status",
                body,
                "application/strategic-merge-patch+json",
            )
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                log(f"status {ns}/{name}: {exc.code} {exc.read()[:300]!r}")

    # -- watch loops ---------------------------------------------------------------------------
    def loop(self, path: str, handle) -> None:  # type: ignore[no-untyped-def]
        while True:
            try:
                listing = self.api.request("GET", path)
                for item in listing.get("items", []):
                    handle(item)
                rv = listing["metadata"]["resourceVersion"]
                while True:
                    with self.api.watch(path, rv) as stream:
                        for line in stream:
                            event = json.loads(line)
                            obj = event["object"]
                            if event["type"] == "ERROR":
                                raise RuntimeError(f"watch {path}: {obj.get('message')}")
                            rv = obj["metadata"]["resourceVersion"]
                            if event["type"] in ("ADDED", "MODIFIED"):
                                handle(obj)
            except Exception as exc:  # reconnect with a relist, as a kubelet's informer does
                log(f"watch {path}: {exc!r}; relisting")
                time.sleep(0.5)

    def run(self) -> None:
        threads = [
            threading.Thread(target=self.loop, args=("/api/v1/nodes", self.node_seen), daemon=True),
            threading.Thread(
                target=self.loop,
                args=("/api/v1/pods?fieldSelector=spec.nodeName%21%3D", self.pod_seen),
                daemon=True,
            ),
            threading.Thread(target=self.heartbeats, daemon=True),
        ]
        for t in threads:
            t.start()
        log("running")
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    server, ca_file, token = sys.argv[1:4]
    FakeKubelet(Api(server, ca_file, token)).run()
