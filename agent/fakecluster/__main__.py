"""Serve a scenario on a local port: ``python -m agent.fakecluster SCENARIO
[--port N] [--kubeconfig PATH] [--speed X] [--token T]``. Prints the URL and
plays the timeline; Ctrl-C stops it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sys

from agent.fakecluster.scenario import Scenario, ScenarioError, ScenarioPlayer


async def _serve(args: argparse.Namespace) -> None:
    scenario = Scenario.load(args.scenario) if args.scenario else Scenario(name="empty")
    cluster = scenario.cluster(token=args.token, bookmark_interval=args.bookmark_interval)
    url = await cluster.start(args.host, args.port)
    print(f"serving {scenario.name!r} at {url}", flush=True)
    if args.kubeconfig:
        print(f"kubeconfig written to {cluster.write_kubeconfig(args.kubeconfig)}", flush=True)
    try:
        speed = math.inf if args.speed == 0 else args.speed
        await ScenarioPlayer(cluster, scenario, speed=speed).play()
        print("timeline played; still serving (Ctrl-C to stop)", flush=True)
        await asyncio.Event().wait()
    finally:
        await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.fakecluster", description=__doc__)
    parser.add_argument("scenario", nargs="?", help="scenario file or folder (default: an empty cluster)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", help="write a kubeconfig pointing at the endpoint here")
    parser.add_argument("--token", help="require this bearer token")
    parser.add_argument("--speed", type=float, default=None, help="playback speed; 0 plays everything at once")
    parser.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between watch bookmarks")
    args = parser.parse_args(argv)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(args))
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
