"""unstick's door to the Kubernetes API.

- ``gateway``: the only module of the project that imports
  ``kubernetes_asyncio``; API-shaped dicts out, the project's errors raised.
- ``errors``: ``KubeError`` and its transient/permanent branches.
- ``kinds``: the table of kinds read (group, version, plural, scope, paths).
- ``watcher``: list-then-watch loops delivering deltas, and metrics polling.

This package module imports nothing on purpose: ``agent.kube.kinds`` and
``agent.kube.errors`` stay importable without pulling in the client library.
"""
