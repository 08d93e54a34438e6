"""The ``unstick`` (and ``kubectl-unstick``) command line.

Sub-commands live in ``agent/commands/``, one module each, listed in
``COMMANDS`` in the order ``--help`` shows them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS: tuple[str, ...] = (
    "agent.commands.demo",
    "agent.commands.watch",
    "agent.commands.analyze",
    "agent.commands.explain",
    "agent.commands.serve",
    "agent.commands.incidents",
    "agent.commands.db",
)

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code 2, never a traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unstick",
        description="Explain why Kubernetes pods stay Pending, rollouts stall and drains hang.",
    )
    parser.add_argument("--log-level", default="WARNING", help="logging level (default: WARNING)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text", help="log line format")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMANDS:
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
    sys.exit(main())
