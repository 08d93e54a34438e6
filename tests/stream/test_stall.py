"""StallWatch: a worker waiting longer than its timeout for records that are there, or for its
table's recovery, is stalled; an idle worker (nothing waiting) never is."""

from __future__ import annotations

from agent.stream.stall import StallWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_records_waiting_and_none_handled_past_the_timeout_is_a_stall() -> None:
    clock = Clock()
    watch = StallWatch(30, clock)
    watch.assigned({0, 1})
    clock.now += 29
    assert watch.stalled(ready=True, lag={0: 5, 1: 0}) is None  # not yet
    watch.handled(0)
    clock.now += 29  # partition 0 handled 29 s ago, partition 1 idle but nothing waits there
    assert watch.stalled(ready=True, lag={0: 5, 1: 0}) is None
    clock.now += 2
    reason = watch.stalled(ready=True, lag={0: 5, 1: 0})
    assert reason is not None and reason.startswith("partition 0: 5 record(s) waiting, none handled for 31s")


def test_an_idle_worker_is_never_stalled() -> None:
    clock = Clock()
    watch = StallWatch(30, clock)
    watch.assigned({0})
    clock.now += 3600
    assert watch.stalled(ready=True, lag={0: 0}) is None
    assert watch.stalled(ready=True, lag={}) is None  # high watermark not known yet


def test_recovery_that_never_completes_is_a_stall_and_an_assignment_restarts_the_clock() -> None:
    clock = Clock()
    watch = StallWatch(30, clock)
    watch.assigned({0, 1, 2, 3})
    watch.stalled(ready=False, lag={}, restored=0)
    clock.now += 31
    reason = watch.stalled(ready=False, lag={}, restored=0)
    assert reason is not None and "recovery restored nothing for 31s" in reason
    watch.assigned({0, 1})  # a new rebalance: recovery starts over
    clock.now += 10
    assert watch.stalled(ready=False, lag={0: 3}) is None


def test_a_long_recovery_that_keeps_reading_is_not_a_stall() -> None:
    clock = Clock()
    watch = StallWatch(30, clock)
    watch.assigned({0})
    for restored in range(0, 100_000, 10_000):  # ten minutes of a large changelog
        clock.now += 60
        assert watch.stalled(ready=False, lag={}, restored=restored) is None
    clock.now += 31  # and then nothing more is read
    assert watch.stalled(ready=False, lag={}, restored=90_000) is not None
