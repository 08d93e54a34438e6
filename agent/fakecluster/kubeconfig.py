"""Write a kubeconfig that points a client at the fake API endpoint.

Plain HTTP on loopback, no TLS; a bearer token when the endpoint asks for one.
The layout is the one ``kubectl config view`` prints, so kubernetes-asyncio's
``load_kube_config(config_file=…, context=…)`` reads it like any other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["kubeconfig_dict", "write_kubeconfig"]


def kubeconfig_dict(
    server: str,
    *,
    token: str | None = None,
    context: str = "unstick-fake",
    namespace: str | None = None,
) -> dict[str, Any]:
    user: dict[str, Any] = {"token": token} if token else {}
    ctx: dict[str, Any] = {"cluster": context, "user": context}
    if namespace:
        ctx["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": context, "user": user}],
        "contexts": [{"name": context, "context": ctx}],
        "current-context": context,
    }


def write_kubeconfig(
    path: str | os.PathLike[str],
    server: str,
    *,
    token: str | None = None,
    context: str = "unstick-fake",
    namespace: str | None = None,
) -> Path:
    """Write (or overwrite) a kubeconfig at ``path``; returns the path.
    The file is created 0600 since it may hold a token."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(kubeconfig_dict(server, token=token, context=context, namespace=namespace), sort_keys=False)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return target
