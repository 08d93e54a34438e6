"""A real Kubernetes control plane for tests: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler of one pinned release (built by
``tests/realcluster/build.sh``), on loopback with ephemeral ports, plus a fake
kubelet process for every Node (``fake_kubelet.py``).

Certificates (a CA, the API server's serving certificate for 127.0.0.1) and the
service-account signing key pair are generated with openssl. Authentication is
a static token file: ``admin`` (system:masters) for the tests, the controller
manager and the fake kubelets, ``system:kube-scheduler`` for the scheduler (the
bootstrap RBAC roles of that user); ServiceAccounts under test get tokens from
the TokenRequest API (:meth:`ControlPlane.service_account_token`).

:class:`Api` is a small synchronous REST client (stdlib urllib) the tests use
to create objects and wait for conditions by watching, never by sleeping.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The pinned release lives in one file (kube-version) that build.sh reads too;
# UNSTICK_REAL_KUBE_VERSION runs the tier on another release (build.sh builds it).
KUBE_VERSION = os.environ.get("UNSTICK_REAL_KUBE_VERSION") or (HERE / "kube-version").read_text().strip()
BUILD_SCRIPT = HERE / "build.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")

# kube-controller-manager --controllers: the ones the tests' workloads need.
CONTROLLERS = (
    "deployment",
    "replicaset",
    "statefulset",
    "job",
    "disruption",
    "garbagecollector",
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
    "persistentvolume-binder",
    # the kubernetes.io/pvc-protection and pv-protection finalizers the API server's admission
    # adds are removed by these: without them a deleted claim or volume stays Terminating
    "pvc-protection",
    "pv-protection",
    "root-ca-cert-publisher",
    # creates a pod's claims from its ResourceClaimTemplates and releases claims of pods gone
    # (without it such a pod stays Pending with no condition and no event)
    "resourceclaim-controller",
)


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message carries log tails."""


class ApiError(RuntimeError):
    def __init__(self, status: int, body: dict[str, Any] | str, what: str) -> None:
        self.status = status
        self.body = body
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{what}: HTTP {status}: {message}")


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_binaries(log_dir: Path) -> Path:
    """The directory holding the five binaries: UNSTICK_KUBE_BIN_DIR, the cache, or a fresh build."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "build.log"
    with log.open("w") as out:
        proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=out, text=True)
    if proc.returncode != 0:
        raise ControlPlaneError(f"building the control plane failed ({BUILD_SCRIPT}):\n{tail(log)}")
    return Path(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------
# REST client


class Api:
    """Synchronous JSON client of the test API server (stdlib only)."""

    def __init__(self, server: str, ca_file: Path, token: str) -> None:
        self.server = server.rstrip("/")
        self.ca_file = ca_file
        self.ctx = ssl.create_default_context(cafile=str(ca_file))
        self._token = token

    def __repr__(self) -> str:
        return f"Api({self.server})"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> Any:
        url = self.server + path
        if params:
            url += ("&" if "?" in path else "?") + urllib.parse.urlencode(params)
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed: dict[str, Any] | str = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            raise ApiError(exc.code, parsed, f"{method} {path}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")  # /readyz, /healthz answer text

    def get(self, path: str, **params: str) -> Any:
        return self.request("GET", path, params=params or None)

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> Any:
        path = collection_path(obj)
        return self.request("POST", path, obj, params={"dryRun": "All"} if dry_run else None)

    def delete(self, path: str, *, grace: int | None = None) -> Any:
        body = (
            None
            if grace is None
            else {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace}
        )
        try:
            return self.request("DELETE", path, body)
        except ApiError as exc:
            if exc.status != 404:
                raise
            return None

    def patch(
        self, path: str, patch: Any, *, kind: str = "strategic-merge-patch", dry_run: bool = False
    ) -> Any:
        return self.request(
            "PATCH",
            path,
            patch,
            content_type=f"application/{kind}+json",
            params={"dryRun": "All"} if dry_run else None,
        )

    def watch(self, path: str, resource_version: str, timeout: float) -> Iterator[dict[str, Any]]:
        """Watch events of ``path`` from ``resource_version`` until ``timeout`` seconds pass."""
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(max(1, int(timeout))),
        }
        url = self.server + path + ("&" if "?" in path else "?") + urllib.parse.urlencode(params)
        req = urllib.request.Request(url)
        req.add_header("Authorization", f"Bearer {self._token}")
        with urllib.request.urlopen(req, context=self.ctx, timeout=timeout + 5) as resp:
            for line in resp:
                yield json.loads(line)

    def wait_for(
        self,
        path: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 60,
        what: str = "",
        since: str | None = None,
    ) -> dict[str, Any]:
        """The first object of the list ``path`` satisfying ``predicate``: list, then watch
        (or only watch from resourceVersion ``since``)."""
        deadline = time.monotonic() + timeout
        if since is None:
            listing = self.get(path)
            for item in listing.get("items", []):
                if predicate(item):
                    return item
            rv = listing["metadata"]["resourceVersion"]
        else:
            rv = since  # every change after ``since``, in order: no intermediate state is missed
        while (left := deadline - time.monotonic()) > 0:
            try:
                for event in self.watch(path, rv, left):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        raise ApiError(int(obj.get("code", 500)), obj, f"watch {path}")
                    rv = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED") and predicate(obj):
                        return obj
            except TimeoutError:
                break
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or path}")


def collection_path(obj: dict[str, Any]) -> str:
    api_version, kind = obj["apiVersion"], obj["kind"]
    ns = obj.get("metadata", {}).get("namespace")
    plural = PLURALS[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if ns and kind not in CLUSTER_SCOPED:
        return f"{base}/namespaces/{ns}/{plural}"
    return f"{base}/{plural}"


def object_path(obj: dict[str, Any]) -> str:
    return f"{collection_path(obj)}/{obj['metadata']['name']}"


PLURALS = {
    "Namespace": "namespaces",
    "Node": "nodes",
    "Pod": "pods",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "StatefulSet": "statefulsets",
    "Job": "jobs",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "PersistentVolume": "persistentvolumes",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "StorageClass": "storageclasses",
    "PriorityClass": "priorityclasses",
    "ServiceAccount": "serviceaccounts",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Event": "events",
    "ConfigMap": "configmaps",
    # resource.k8s.io (DRA)
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
}
CLUSTER_SCOPED = {
    "Namespace",
    "Node",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "DeviceClass",
    "ResourceSlice",
}


# ------------------------------------------------------------------------------------------------
# the control plane


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class ControlPlane:
    """A running control plane; :meth:`start` builds it, :meth:`stop` tears it down.

    Options (keyword fields) for tests that need more than the default scheduler:

    - ``scheduler_config``: a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)
      as a dict, passed with ``--config``; the harness sets its ``clientConnection.
      kubeconfig`` and turns leader election off (flags are ignored with ``--config``).
    - ``extra_controllers``: more kube-controller-manager controllers (e.g.
      ``resourceclaim-controller``, ``device-taint-eviction-controller``).
    - ``feature_gates``: ``--feature-gates`` for the API server, controller manager
      and scheduler alike (e.g. ``{"DRADeviceTaintRules": True}``).
    - ``runtime_config``: the API server's ``--runtime-config`` (e.g.
      ``resource.k8s.io/v1beta2=true`` for an API version off by default).
    """

    bin_dir: Path
    work: Path
    scheduler_config: dict[str, Any] | None = None
    extra_controllers: tuple[str, ...] = ()
    feature_gates: dict[str, bool] = field(default_factory=dict)
    runtime_config: str = ""
    server: str = ""
    api: Api = field(init=False)
    kubeconfig: Path = field(init=False)
    etcd_url: str = ""
    processes: list[Process] = field(default_factory=list)
    started_in: float = 0.0
    _admin_token: str = field(default="", repr=False)

    # -- setup -------------------------------------------------------------------------------------
    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.work, check=True, capture_output=True)

    def _certificates(self) -> None:
        self._openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=unstick-test-ca",
            "-days",
            "3",
        )
        (self.work / "san.ext").write_text(
            "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
            "extendedKeyUsage=serverAuth\n"
        )
        self._openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "apiserver.key",
            "-out",
            "apiserver.csr",
            "-subj",
            "/CN=kube-apiserver",
        )
        self._openssl(
            "x509",
            "-req",
            "-in",
            "apiserver.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "apiserver.crt",
            "-days",
            "3",
            "-extfile",
            "san.ext",
        )
        self._openssl("genrsa", "-out", "sa.key", "2048")
        self._openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")

    def _kubeconfig(self, name: str, token: str) -> Path:
        path = self.work / f"{name}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.work / "ca.crt")},
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": name}}],
            "current-context": "test",
        }
        path.write_text(json.dumps(config, indent=1))
        path.chmod(0o600)
        return path

    def _spawn(self, name: str, args: list[str]) -> Process:
        log = self.work / f"{name}.log"
        out = log.open("wb")
        popen = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, cwd=self.work, start_new_session=True
        )
        out.close()
        proc = Process(name, popen, log)
        self.processes.append(proc)
        return proc

    def _wait(self, proc: Process, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(f"{proc.name} exited with {proc.popen.returncode}:\n{tail(proc.log)}")
            try:
                if check():
                    return
            except (OSError, ApiError, ValueError):
                pass
            time.sleep(0.1)
        raise ControlPlaneError(f"{proc.name} not ready after {timeout:.0f}s:\n{tail(proc.log)}")

    def start(self) -> ControlPlane:
        t0 = time.monotonic()
        self._certificates()
        b = self.bin_dir
        admin, scheduler = secrets.token_hex(16), secrets.token_hex(16)
        self._admin_token = admin
        (self.work / "tokens.csv").write_text(
            f'{admin},admin,uid-admin,"system:masters"\n{scheduler},system:kube-scheduler,uid-scheduler,\n'
        )
        (self.work / "tokens.csv").chmod(0o600)

        client, peer, secure, sched_port = free_port(), free_port(), free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        data_root = Path("/dev/shm") if Path("/dev/shm").is_dir() else self.work
        etcd_data = Path(tempfile.mkdtemp(prefix="unstick-etcd-", dir=data_root))
        self._etcd_data = etcd_data
        etcd = self._spawn(
            "etcd",
            [
                str(b / "etcd"),
                "--name=test",
                f"--data-dir={etcd_data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=test=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait(
            etcd, lambda: b'"true"' in urllib.request.urlopen(self.etcd_url + "/health", timeout=2).read(), 30
        )

        self.server = f"https://127.0.0.1:{secure}"
        self.api = Api(self.server, self.work / "ca.crt", admin)
        w = self.work
        self._apiserver_args = [
            str(b / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={secure}",
            f"--tls-cert-file={w / 'apiserver.crt'}",
            f"--tls-private-key-file={w / 'apiserver.key'}",
            f"--client-ca-file={w / 'ca.crt'}",
            f"--token-auth-file={w / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={w / 'sa.pub'}",
            f"--service-account-signing-key-file={w / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            f"--cert-dir={w}",
            "--endpoint-reconciler-type=none",
            # TaintNodesByCondition would taint every new Node not-ready until the node lifecycle
            # controller (not run here: no real kubelets) lifts it; the fake kubelet's Nodes are Ready.
            "--disable-admission-plugins=TaintNodesByCondition",
            # served from etcd, so a watch from a compacted revision really gets 410 Gone
            "--watch-cache-sizes=poddisruptionbudgets.policy#0",
            *self._gate_flags(),
            *([f"--runtime-config={self.runtime_config}"] if self.runtime_config else []),
            "--v=1",
        ]
        self._start_apiserver()

        self.kubeconfig = self._kubeconfig("admin", admin)
        kcm = self._spawn(
            "kube-controller-manager",
            [
                str(b / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--controllers={','.join((*CONTROLLERS, *self.extra_controllers))}",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={w / 'sa.key'}",
                f"--root-ca-file={w / 'ca.crt'}",
                "--cluster-signing-duration=1h",
                "--concurrent-deployment-syncs=2",
                *self._gate_flags(),
                "--v=1",
            ],
        )
        sched_config = self._kubeconfig("scheduler", scheduler)
        sched = self._spawn(
            "kube-scheduler",
            [
                str(b / "kube-scheduler"),
                *self._scheduler_config_flags(sched_config),
                *self._gate_flags(),
                "--bind-address=127.0.0.1",
                f"--secure-port={sched_port}",
                f"--authentication-kubeconfig={sched_config}",
                f"--authorization-kubeconfig={sched_config}",
                "--v=1",
            ],
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self._wait(
            sched,
            lambda: (
                urllib.request.urlopen(
                    f"https://127.0.0.1:{sched_port}/readyz", context=insecure, timeout=2
                ).status
                == 200
            ),
            60,
        )
        # The controller manager is ready when its serviceaccount controller has made `default`'s SA.
        self._wait(
            kcm, lambda: self.api.get("/api/v1/namespaces/default/serviceaccounts/default") is not None, 60
        )
        self._spawn(
            "fake-kubelet",
            [sys.executable, str(HERE / "fake_kubelet.py"), self.server, str(w / "ca.crt"), admin],
        )
        self.started_in = time.monotonic() - t0
        return self

    def _start_apiserver(self) -> float:
        """Start kube-apiserver (again) with the same flags, port and etcd; seconds until ready."""
        t0 = time.monotonic()
        apiserver = self._spawn("kube-apiserver", self._apiserver_args)
        self._wait(apiserver, lambda: self.api.request("GET", "/readyz", timeout=2) == "ok", 60)
        return time.monotonic() - t0

    def stop_apiserver(self) -> float:
        """Stop kube-apiserver as a restart does (SIGTERM, SIGKILL after 5 s: its graceful
        shutdown waits for long-running requests that the clients keep open): every watch and
        connection of the clients breaks; etcd and the other components stay. Seconds taken."""
        t0 = time.monotonic()
        (proc,) = [p for p in self.processes if p.name == "kube-apiserver"]
        self.processes.remove(proc)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.popen.pid, signal.SIGTERM)
        try:
            proc.popen.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait(5)
        proc.log.rename(proc.log.with_suffix(f".{int(time.time())}.log"))  # keep the old log
        return time.monotonic() - t0

    def start_apiserver(self) -> float:
        """Start the kube-apiserver :meth:`stop_apiserver` stopped, on the same port and etcd
        (clients reconnect to the same address); seconds until its ``/readyz`` says ok."""
        return self._start_apiserver()

    def _etcd_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.loads(resp.read()))

    def etcd_revision(self) -> int:
        """etcd's current revision (the API server's resourceVersions are etcd revisions)."""
        head = self._etcd_post("/v3/kv/range", {"key": base64.b64encode(b"/registry/health").decode()})
        return int(head["header"]["revision"])

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision through its gRPC gateway (``POST
        /v3/kv/compaction``, the v3 KV API; no etcdctl needed), physically: a watch or a
        continue token from an older resourceVersion then gets 410 Gone from whatever etcd
        serves. Returns the revision compacted at."""
        revision = self.etcd_revision()
        self._etcd_post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _gate_flags(self) -> list[str]:
        if not self.feature_gates:
            return []
        gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
        return [f"--feature-gates={gates}"]

    def _scheduler_config_flags(self, kubeconfig: Path) -> list[str]:
        if self.scheduler_config is None:
            return [f"--kubeconfig={kubeconfig}", "--leader-elect=false"]
        config = json.loads(json.dumps(self.scheduler_config))
        config.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
        config.setdefault("kind", "KubeSchedulerConfiguration")
        config.setdefault("clientConnection", {})["kubeconfig"] = str(kubeconfig)
        config.setdefault("leaderElection", {})["leaderElect"] = False
        path = self.work / "kube-scheduler-config.json"
        path.write_text(json.dumps(config, indent=2))
        return [f"--config={path}"]

    def check_alive(self) -> None:
        for proc in self.processes:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(f"{proc.name} exited with {proc.popen.returncode}:\n{tail(proc.log)}")

    def log_tails(self, lines: int = 15) -> str:
        return "\n".join(f"--- {p.name} ({p.log})\n{tail(p.log, lines)}" for p in self.processes)

    def stop(self) -> None:
        for proc in reversed(self.processes):
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGTERM)
        for proc in reversed(self.processes):
            try:
                proc.popen.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait(5)
        shutil.rmtree(getattr(self, "_etcd_data", ""), ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------------
    @property
    def admin_token(self) -> str:
        return self._admin_token

    def kubectl(
        self,
        *args: str,
        kubeconfig: Path | None = None,
        timeout: float = 120,
        check: bool = True,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}"
            )
        return proc

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        req = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        out = self.api.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", req)
        return str(out["status"]["token"])

    def kubeconfig_for(self, name: str, token: str) -> Path:
        return self._kubeconfig(name, token)

    def new_namespace(self, prefix: str) -> str:
        ns = self.api.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": f"{prefix[:40]}-"}}
        )
        name = str(ns["metadata"]["name"])
        # ServiceAccount admission refuses pods until the namespace's default SA exists.
        self.api.wait_for(
            f"/api/v1/namespaces/{name}/serviceaccounts",
            lambda sa: sa["metadata"]["name"] == "default",
            timeout=30,
            what=f"{name}/default SA",
        )
        return name

    def delete_namespace(self, name: str) -> None:
        self.api.delete(f"/api/v1/namespaces/{name}")

    def delete_nodes(self, names: list[str]) -> None:
        for n in names:
            self.api.delete(f"/api/v1/nodes/{n}")

    def all_nodes(self) -> list[dict[str, Any]]:
        return list(self.api.get("/api/v1/nodes")["items"])


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    extra: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node as a kubelet registers it (capacity = allocatable here), Ready."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi", **(extra or {})}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": KUBE_VERSION,
                "architecture": "amd64",
                "operatingSystem": "linux",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "",
                "osImage": "",
                "containerRuntimeVersion": "fake://1",
                "kubeProxyVersion": "",
            },
        },
    }
    if taints:
        obj["spec"]["taints"] = taints
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj
