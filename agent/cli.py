"""The ``unstick`` (and ``kubectl-unstick``) command line.

Sub-commands live in ``agent/commands/``, one module each, listed in
``COMMANDS`` in the order ``--help`` shows them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# (name, module, one-line help). Only the module of the command being run is
# imported, so `unstick explain` does not pay for aiohttp and SQLAlchemy.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "agent.commands.demo", "no cluster needed: watch the seed incidents unfold against an in-process Kubernetes API"),
    ("watch", "agent.commands.watch", "watch a cluster live: explain stuck pods, rollouts and drains as they happen"),
    ("worker", "agent.commands.worker", "analyse a fleet of clusters from Kafka (faust-streaming; watch --publish feeds it)"),
    ("analyze", "agent.commands.analyze", "analyse a dump of kubectl JSON/YAML: pending pods, rollouts, PDBs, root causes"),
    ("place", "agent.commands.place", "where would this pod (or the next N replicas) land, and why: the Score phase"),
    ("explain", "agent.commands.explain", "explain a FailedScheduling or eviction message"),
    ("serve", "agent.commands.serve", "serve the incident history API and pages"),
    ("incidents", "agent.commands.incidents", "list and show recorded incidents"),
    ("silences", "agent.commands.silences", "silence notifications: add, list and remove silences"),
    ("db", "agent.commands.db", "manage the incident database schema"),
)

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code 2, never a traceback."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``only``, just that sub-command is built in full
    (the others are listed for --help without importing their modules)."""
    parser = argparse.ArgumentParser(
        prog="unstick",
        description="Explain why Kubernetes pods stay Pending, rollouts stall and drains hang.",
    )
    parser.add_argument("--log-level", default="WARNING", help="logging level (default: WARNING)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text", help="log line format")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name, help_text in COMMANDS:
        if only is None or only == name:
            importlib.import_module(module_name).register(sub)
        else:
            sub.add_parser(name, help=help_text)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    names = {name for name, _, _ in COMMANDS}
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--log-level", "--log-format"):
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in names else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    from agent.logs import configure_logging

    configure_logging(args.log_level, args.log_format)
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"unstick: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # e.g. `unstick analyze … | head`: the reader went away.
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    # `python -m agent.cli`: run the imported module's main, so that the commands'
    # `agent.cli.UserError` is the class caught here (this file runs as `__main__`).
    from agent.cli import main as _main

    sys.exit(_main())
