"""The pure analysis core of unstick.

Everything here is a function of plain data: Kubernetes objects in, slim
records, simulated scheduler verdicts and Findings out. No I/O, no asyncio,
no clock reads (callers pass ``now``), so the live agent and the offline
``unstick analyze`` share one code path from the snapshot on.
"""
