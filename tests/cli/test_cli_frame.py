"""The command table: every listed module registers the command it is listed under."""

from __future__ import annotations

import argparse

import pytest

from agent.cli import COMMANDS, _command_of, build_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize(("name", "module"), [(n, m) for n, m, _ in COMMANDS])
def test_each_module_registers_its_own_command(name: str, module: str) -> None:
    full = _subcommands(build_parser(name))[name]
    nested = [a for a in full._actions if isinstance(a, argparse._SubParsersAction)]
    leaves = list(nested[0].choices.values()) if nested else [full]  # e.g. `db upgrade|current`
    for leaf in leaves:
        assert leaf.get_default("func") is not None, f"{module} did not set func for {leaf.prog}"


def test_the_full_parser_has_every_command_and_the_picker_finds_it() -> None:
    assert set(_subcommands(build_parser())) == {n for n, _, _ in COMMANDS}
    assert _command_of(["--log-level", "DEBUG", "analyze", "x"]) == "analyze"
    assert _command_of(["--log-format", "json", "explain"]) == "explain"
    assert _command_of(["--help"]) is None and _command_of(["nonsense"]) is None
