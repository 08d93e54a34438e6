"""The documentation's option tables say what the argument parsers accept.

docs/options.md is generated from the parsers (scripts/options_reference.py)
and must be current; every other table in docs/ that lists an option of
`unstick` or `kubectl unstick` in its first column must name a real one.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from agent import cli
from agent.commands import kubectl

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "options_reference", ROOT / "scripts" / "options_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _all_option_strings() -> set[str]:
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction):  # -h/--help: every parser has it
                found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)

    walk(cli.build_parser())
    walk(kubectl.build_parser())
    return found


def test_the_options_page_is_generated_from_the_current_parsers() -> None:
    generated = _generator().render()
    assert (DOCS / "options.md").read_text() == generated, (
        "docs/options.md is stale: run .venv/bin/python scripts/options_reference.py"
    )


def test_the_options_page_lists_every_option_of_every_parser() -> None:
    text = (DOCS / "options.md").read_text()
    documented = set(re.findall(r"`(--?[A-Za-z][\w-]*)`", text))
    assert _all_option_strings() - documented == set()


def test_option_tables_elsewhere_in_docs_name_real_options() -> None:
    real = _all_option_strings()
    unknown: list[str] = []
    pages = [*DOCS.glob("*.md"), ROOT / "README.md"]
    for page in pages:
        for line in page.read_text().splitlines():
            if not line.startswith("| `-"):
                continue
            first_cell = line.split("|")[1]
            for option in re.findall(r"`(--?[A-Za-z][\w-]*)", first_cell):
                if option not in real:
                    unknown.append(f"{page.name}: {option}")
    assert unknown == []


def test_the_check_notices_a_parser_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new option makes the generated page differ (the check can fail)."""
    generator = _generator()
    before = generator.render()
    original = kubectl.build_parser

    def with_extra() -> argparse.ArgumentParser:
        parser = original()
        parser.add_argument("--invented-for-the-test", help="not real")
        return parser

    monkeypatch.setattr(kubectl, "build_parser", with_extra)
    after = generator.render()
    assert after != before and "--invented-for-the-test" in after
