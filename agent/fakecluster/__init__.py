"""A protocol-faithful, in-process Kubernetes API endpoint (aiohttp) for
tests and ``unstick demo``: list/watch with resourceVersion semantics,
bookmarks, pagination, selectors, injectable faults, and scenarios played
from YAML files of Kubernetes objects.

It never imports ``kubernetes_asyncio``: clients reach it over HTTP, through
the kubeconfig ``write_kubeconfig`` writes."""

from agent.fakecluster.kubeconfig import kubeconfig_dict, write_kubeconfig
from agent.fakecluster.scenario import Scenario, ScenarioError, ScenarioPlayer, Step, load_objects
from agent.fakecluster.server import FakeCluster, Faults, RequestRecord, status_body

__all__ = [
    "FakeCluster",
    "Faults",
    "RequestRecord",
    "Scenario",
    "ScenarioError",
    "ScenarioPlayer",
    "Step",
    "kubeconfig_dict",
    "load_objects",
    "status_body",
    "write_kubeconfig",
]
