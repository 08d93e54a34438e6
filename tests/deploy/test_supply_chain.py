"""The hashed locks: every pin carries sha256 hashes, the locks cover what pyproject.toml
asks for (runtime in requirements/runtime.txt; runtime, test and scale in
requirements/lock.txt, with the same versions), and the two README commands, the image and
CI install from them with ``--require-hashes`` before the project with ``--no-deps``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^ ;\\]+)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    text = path.read_text()
    pins: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = PIN.match(block)
        if m is None:
            continue
        assert "--hash=sha256:" in block, f"{path.name}: {m.group(1)} has no hash"
        pins[_norm(m.group(1))] = m.group(2)
    return pins


def _requirement_names(specs: list[str]) -> set[str]:
    return {_norm(re.split(r"[<>=!~\[; ]", s, maxsplit=1)[0]) for s in specs}


def test_locks_pin_everything_with_hashes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, full = _pins(ROOT / "requirements/runtime.txt"), _pins(ROOT / "requirements/lock.txt")
    assert _requirement_names(project["dependencies"]) <= set(runtime)
    extras = project["optional-dependencies"]["test"] + project["optional-dependencies"]["scale"]
    assert _requirement_names(project["dependencies"] + extras) <= set(full)
    assert {k: full[k] for k in runtime} == runtime  # one version of each package in both


def test_installs_use_the_locks() -> None:
    test = (ROOT / "scripts/test").read_text()
    demo = (ROOT / "scripts/demo").read_text()
    assert "--require-hashes -r requirements/lock.txt" in test and "--no-deps -e ." in test
    assert "--require-hashes -r requirements/runtime.txt" in demo and "--no-deps -e ." in demo
    assert "scripts/audit" in test
    assert test.index("--require-hashes") < test.index("--no-deps -e .")
