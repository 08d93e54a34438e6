"""A process that only drains the outbox, built by the agent's composition root
(``AgentHost.start_notifier``) from the same options as ``unstick watch``: the
subject of the crash test, which kills it with SIGKILL mid-burst.

    python -m tests.notify.outbox_agent --db URL --webhook-url URL --webhook-secret-file PATH
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from agent.notify.settings import NotifySettings, add_notify_arguments
from agent.runner import AgentHost, install_signal_handlers


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    add_notify_arguments(parser)
    args = parser.parse_args(argv)
    notify = NotifySettings.from_args(args)
    stop = asyncio.Event()
    install_signal_handlers(stop)
    host = await AgentHost.open(args.db, migrate=False)
    try:
        worker = await host.start_notifier(notify)
        assert worker is not None
        print("draining", flush=True)
        await stop.wait()
    finally:
        await host.close(drain_seconds=0)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
