"""The HTTP side of unstick: the incident history API, its OpenAPI document,
health and metrics endpoints, and the server-rendered pages.

Build it with :func:`agent.api.app.create_app`; the live agent mounts the
same application and plugs its readiness in.
"""
