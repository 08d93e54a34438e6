"""Write docs/options.md: every option of every command, read from the argument parsers.

    .venv/bin/python scripts/options_reference.py          # rewrite docs/options.md
    .venv/bin/python scripts/options_reference.py --check  # exit 1 if docs/options.md is stale

`tests/cli/test_docs_options.py` runs the check, so the page cannot drift from
`agent/cli.py`, `agent/commands/*` and the kubectl plugin's parser.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAGE = ROOT / "docs" / "options.md"

HEADER = """# Options of every command

[Documentation index](index.md)

Generated from the argument parsers by `scripts/options_reference.py`; a test
(`tests/cli/test_docs_options.py`) fails when a parser and this page disagree.
Options that also read an environment variable name it in their help text;
every command also takes `-h`/`--help`.
How each command behaves is on its own page: [analyze](analyze.md),
[explain](explain-command.md), [watch](watch.md),
[notifications](notifications.md), [kubectl unstick](kubectl-plugin.md),
[serve, incidents, db](api.md), [worker](scale-out.md).
"""


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|").replace("\n", " ").strip()


def _default(action: argparse.Action) -> str:
    if action.default is None or action.default is argparse.SUPPRESS:
        return ""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return ""
    if isinstance(action.default, list | tuple) and not action.default:
        return ""
    return f"`{action.default}`"


def _spelling(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`" + (" …" if action.nargs in ("*", "+") else "")
    names = ", ".join(f"`{name}`" for name in action.option_strings)
    if action.nargs == 0:
        return names
    if action.choices is not None:
        value = "|".join(str(choice) for choice in action.choices)
    else:
        value = str(action.metavar or action.dest.upper())
    return f"{names} {_cell(value)}"


def table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        meaning = _cell((action.help or "") % {"default": action.default} if action.help else "")
        if action.required and action.option_strings:
            meaning = (meaning + " (required)").strip()
        rows.append(f"| {_spelling(action)} | {_default(action)} | {meaning} |")
    for group in parser._mutually_exclusive_groups:
        names = [a.option_strings[0] for a in group._group_actions if a.option_strings]
        rows.append(
            f"| | | {'one of' if group.required else 'at most one of'} {', '.join(f'`{n}`' for n in names)} |"
        )
    return rows


def _sections(title: str, parser: argparse.ArgumentParser) -> list[str]:
    out = [f"## `{title}`", ""]
    if parser.description:
        out += [_cell(parser.description.split("\n\n")[0]), ""]
    out += table(parser)
    out.append("")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out += _sections(f"{title} {name}", child)
    return out


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def render() -> str:
    from agent import cli
    from agent.commands import kubectl, kubectl_place

    parser = cli.build_parser()
    out = [HEADER, "## `unstick` (before any command)", ""]
    out += table(parser)
    out.append("")
    for name, child in subcommands(parser).items():
        out += _sections(f"unstick {name}", child)
    out += _sections("kubectl unstick", kubectl.build_parser())
    out += _sections("kubectl unstick place", kubectl_place.build_place_parser())
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(
                f"{PAGE.relative_to(ROOT)} is stale: run .venv/bin/python scripts/options_reference.py",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
