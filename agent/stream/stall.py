"""Telling a worker whose consumer stopped delivering records from one that is merely idle.

faust-streaming 0.15.3 sometimes stops delivering after a rebalance: seen on Apache Kafka 4.4
in 3 of 13 runs of the fleet test that kills one of two workers — either the table's recovery
never reads its changelog (the stream partitions stay paused, faust logs "No event received
for active tp … since recovery start"), or recovery completes and the partitions are resumed
while records wait at the broker and none reaches the agent. The worker cannot mend faust's
consumer from outside, so it says so: ``/healthz`` answers 503 with the reason once
:meth:`StallWatch.stalled` has one, and a liveness probe restarts the process (a restarted
worker rejoins the group and recovers as any other; what it applied is in the table and the
database, so nothing is lost or counted twice).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping


class StallWatch:
    """Per assigned partition, when a record was last handled; ``stalled`` says whether the
    worker has been waiting longer than ``timeout`` seconds for something that should come."""

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        self.clock = clock
        self._assigned_at = clock()
        self._progress: dict[int, float] = {}
        self._restored: int | None = None  # how many table entries recovery had restored when last asked

    def assigned(self, partitions: set[int]) -> None:
        """A rebalance gave the worker ``partitions``: every clock starts again."""
        now = self._assigned_at = self.clock()
        self._progress = dict.fromkeys(partitions, now)

    def handled(self, partition: int) -> None:
        self._progress[partition] = self.clock()

    def stalled(self, *, ready: bool, lag: Mapping[int, int], restored: int = 0) -> str | None:
        """Why the worker is stuck, or None: not ready (the table's recovery not done) with no
        progress for longer than the timeout — ``restored``, the table's entries, moving
        counts as progress, so a large changelog may take as long as it reads on — or records
        of a partition waiting at the broker (``lag``) while none of that partition was
        handled for longer than the timeout."""
        now = self.clock()
        if not ready:
            if restored != self._restored:
                self._restored, self._assigned_at = restored, now
            if now - self._assigned_at > self.timeout:
                return f"not ready, and recovery restored nothing for {now - self._assigned_at:.0f}s"
        for partition, waiting in sorted(lag.items()):
            idle = now - self._progress.get(partition, self._assigned_at)
            if waiting > 0 and idle > self.timeout:
                return f"partition {partition}: {waiting} record(s) waiting, none handled for {idle:.0f}s"
        return None
