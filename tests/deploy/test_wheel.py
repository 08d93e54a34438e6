"""The wheel the Dockerfile builds carries everything, the migrations included.

The wheel is built from a copy of exactly what ``deploy/Dockerfile`` copies
into its build stage, installed into a clean virtualenv (its dependencies are
borrowed from the test environment's site-packages through a ``.pth`` line,
so nothing is downloaded; unstick itself comes only from the wheel), and
``unstick db upgrade`` and ``unstick demo --once`` are run from there, outside
the source tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from storage.migrate import head_revision

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
# The top-level alembic/ folder ships inside the wheel as storage/alembic/.
WHEEL_PATH_OF = {"alembic": "storage/alembic"}


def dockerfile_sources() -> list[str]:
    """What the Dockerfile's build stage COPYs from the context (files and folders)."""
    text = DOCKERFILE.read_text()
    build_stage = text.split("\nFROM ", 2)[1]
    return [src for m in re.finditer(r"^COPY (?!--from)(.+)$", build_stage, re.M) for src in m.group(1).split()[:-1]]


def _ignored(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix == ".pyc"


def test_the_dockerfile_builds_this_wheel() -> None:
    """The build stage runs the same `pip wheel` as the fixture below, on the same files."""
    assert "RUN pip wheel --no-deps -w /wheels ." in DOCKERFILE.read_text()
    assert {
        "pyproject.toml", "README.md", "requirements/runtime.txt", "agent", "analyzers", "storage", "alembic"
    } == set(dockerfile_sources())


def _copy_context(dest: Path) -> None:
    for name in dockerfile_sources():
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    context = tmp_path_factory.mktemp("context")
    _copy_context(context)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=context,
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    (built,) = out.glob("unstick-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding only the wheel; dependencies come from this test environment."""
    home = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True)
    python = home / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # A plain path line: the test environment's own .pth files (its editable
    # unstick finder among them) are not processed from there.
    Path(purelib, "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return home


def _run(venv: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UNSTICK_", "PYTHON"))}
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_wheel_carries_every_source_file(wheel: Path) -> None:
    expected = set()
    for name in dockerfile_sources():
        src = ROOT / name
        if not src.is_dir():
            continue
        for path in src.rglob("*"):
            if path.is_file() and not _ignored(path):
                rel = path.relative_to(ROOT).as_posix()
                top, _, rest = rel.partition("/")
                expected.add(f"{WHEEL_PATH_OF.get(top, top)}/{rest}")
    with zipfile.ZipFile(wheel) as zf:
        carried = {n for n in zf.namelist() if ".dist-info/" not in n}
    missing = sorted(expected - carried)
    assert not missing, (
        "the wheel lacks these files: add their package to [tool.setuptools] packages "
        f"or their pattern to package-data in pyproject.toml: {missing}"
    )
    # Only the source folders, renamed as mapped: nothing lands on site-packages/alembic (the library).
    assert not any(n.startswith("alembic/") for n in carried)
    assert "storage/alembic/env.py" in carried and "storage/alembic/script.py.mako" in carried


def test_the_installed_wheel_runs_the_migrations(venv: Path, tmp_path: Path) -> None:
    where = _run(
        venv,
        tmp_path,
        "python",
        "-c",
        "import agent, storage.migrate as m; print(agent.__file__); print(m.script_location())",
    )
    assert where.returncode == 0, where.stderr
    agent_file, location = where.stdout.split()
    assert Path(agent_file).is_relative_to(venv) and Path(location).is_relative_to(venv)

    db = f"sqlite+aiosqlite:///{tmp_path / 'wheel.db'}"
    first = _run(venv, tmp_path, "unstick", "db", "upgrade", "--db", db)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().endswith(f"upgraded from empty to {head_revision()}")
    again = _run(venv, tmp_path, "unstick", "db", "upgrade", "--db", db)
    assert again.returncode == 0 and f"already at revision {head_revision()}" in again.stdout
    current = _run(venv, tmp_path, "unstick", "db", "current", "--db", db)
    assert current.returncode == 0 and current.stdout.startswith(f"{head_revision()} (head)")


def test_the_installed_wheel_plays_the_demo(venv: Path, tmp_path: Path) -> None:
    done = _run(
        venv,
        tmp_path,
        "unstick",
        "demo",
        "--once",
        "--json",
        "--scenario",
        "gpu-rollout-deadlock",
        "--db",
        f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}",
    )
    assert done.returncode in (0, 1), done.stderr
    incidents = json.loads(done.stdout)
    assert [i["rule_id"] for i in incidents] == ["rollout-surge-deadlock"]
    assert not any(tmp_path.glob("*.ini"))  # no alembic.ini needed


def test_the_alembic_folder_does_not_shadow_the_library() -> None:
    """``alembic/`` has no ``__init__.py``: with the source tree first on sys.path, ``import alembic``
    is still the library, and ruff's import sorter files it as third-party (as mypy resolves it)."""
    assert not (ROOT / "alembic" / "__init__.py").exists()
    assert not (ROOT / "alembic" / "versions" / "__init__.py").exists()
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import alembic.command; print(alembic.__file__)",
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert Path(found).parent.name == "alembic" and not Path(found).is_relative_to(ROOT / "alembic")
    ruff = Path(sys.executable).with_name("ruff")
    sorted_ok = subprocess.run(
        [str(ruff), "check", "--no-cache", "--select", "I", "alembic/env.py", "storage/migrate.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert sorted_ok.returncode == 0, sorted_ok.stdout
