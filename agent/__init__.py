"""Everything of unstick that does I/O: CLI, Kubernetes gateway, cache,
pipeline, incident tracking, notifiers and the HTTP API. It composes
``analyzers`` (the pure core) and ``storage`` (the incident store)."""
