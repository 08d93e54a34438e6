"""Mutation testing of the core: how many behaviour changes the tests catch.

    .venv/bin/python bench/mutation.py analyzers/rollout.py            # one module, its tests
    .venv/bin/python bench/mutation.py analyzers/simulator/ --jobs 1   # a package, module by module
    .venv/bin/python bench/mutation.py analyzers/disruption.py --show-survivors
    scripts/mutation                                                   # every module of DEFAULT_TARGETS

A small mutmut-style tool (mutmut 3 rewrites the whole tree into ``mutants/``;
this one needs no copy): each mutant changes one operator or constant inside
one function (``<`` -> ``<=``, ``==`` -> ``!=``, ``and`` -> ``or``, ``+`` ->
``-``, ``not x`` -> ``x``, ``n`` -> ``n + 1``, ``True`` <-> ``False``, ``in``
<-> ``not in``, ``is`` <-> ``is not``, ``+=`` <-> ``-=``). A forked child
swaps the mutated function's ``__code__`` into the live function object (so
every ``from module import f`` sees it), runs the module's targeted tests with
pytest (``-x``), and the mutant is *killed* when they fail or time out.
Module-level statements, docstrings and strings are not mutated; a line ending
in ``# pragma: no mutate`` is skipped. Prints each module's score and the total;
exit 1 when the total is under ``--fail-under``.

CPU-heavy: runs one mutant at a time by default, never in CI.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import os
import select
import signal
import sys
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _sim(*names: str) -> list[str]:
    return [f"tests/simulator/test_{n}.py" for n in names]


# Module (or package folder) -> the tests that exercise it (pytest arguments).
TESTS: dict[str, list[str]] = {
    "analyzers/rollout.py": [
        "tests/core/test_rollout.py",
        "tests/rules/test_rollout_remedy_strategy.py",
        "tests/scenarios/test_golden.py",
        "-k",
        "rollout",
    ],
    "analyzers/disruption.py": [
        "tests/core/test_disruption.py",
        "tests/rules/test_pdb_blocks_eviction.py",
        "tests/simulator/test_preemption.py",
    ],
    # Each simulator module: the test files that exercise it (coverage per test file), the most
    # specific first so that a killed mutant fails early; the folder is the fallback for new modules.
    "analyzers/simulator/basic.py": _sim(
        "filters_node", "basic_boundaries", "init_ports_and_selector_parsing", "preemption", "filters_pods"
    ),
    "analyzers/simulator/dra.py": [
        *_sim("pre_enqueue_and_prefilter"),
        "tests/rules/test_scheduler_silent.py",
        *_sim("contracts"),
    ],
    "analyzers/simulator/engine.py": _sim(
        "contracts",
        "pre_enqueue_and_prefilter",
        "filters_node",
        "filters_pods",
        "filters_resources_volumes",
        "preemption",
        "init_ports_and_selector_parsing",
        "engine_breakdown",
        "framework_outcome",
        "breakdown",
    ),
    "analyzers/simulator/framework.py": _sim(
        "framework_outcome",
        "contracts",
        "engine_breakdown",
        "preemption",
        "filters_pods",
        "filters_node",
        "breakdown",
    ),
    "analyzers/simulator/interpod.py": _sim(
        "interpod_boundaries",
        "filters_pods",
        "preemption",
        "init_ports_and_selector_parsing",
        "pre_enqueue_and_prefilter",
    ),
    "analyzers/simulator/nodeinfo.py": _sim(
        "node_affinity_operators",
        "resources_boundaries",
        "spread_boundaries",
        "interpod_boundaries",
        "nodetable_derive",
        "contracts",
        "filters_node",
        "render_versions",
        "pv_node_affinity",
        "filters_resources_volumes",
        "filters_pods",
        "preemption",
    ),
    "analyzers/simulator/preemption.py": _sim(
        "preemption",
        "preemption_grouped",
        "preemption_boundaries",
        "preemption_candidates",
        "resources_boundaries",
        "spread_boundaries",
        "interpod_boundaries",
        "framework_outcome",
        "basic_boundaries",
        "filters_resources_volumes",
        "contracts",
        "pre_enqueue_and_prefilter",
    ),
    "analyzers/simulator/render.py": _sim("render_versions", "filters_node", "contracts"),
    "analyzers/simulator/resources.py": _sim(
        "resources_boundaries",
        "filters_resources_volumes",
        "preemption",
        "seed_incident",
        "contracts",
        "filters_node",
    ),
    "analyzers/simulator/results.py": _sim("seed_incident", "engine_breakdown", "breakdown"),
    "analyzers/simulator/selectors.py": _sim(
        "init_ports_and_selector_parsing", "pv_node_affinity", "filters_node", "filters_pods"
    ),
    "analyzers/simulator/spread.py": [
        *_sim("spread_boundaries", "filters_pods", "breakdown"),
        "tests/rules/test_placement_root_cause.py",
    ],
    "analyzers/simulator/versions.py": _sim(
        "version_boundaries", "render_versions", "filters_node", "preemption", "filters_pods"
    ),
    "analyzers/simulator/volumes.py": _sim(
        "volumes_boundaries", "filters_resources_volumes", "pv_node_affinity", "pre_enqueue_and_prefilter"
    ),
    "analyzers/simulator/": ["tests/simulator"],
    # The tracker's own tests, on SQLite and a real PostgreSQL (-k "not postgres": SQLite only).
    "storage/tracker.py": [
        "tests/storage/test_tracker_validation.py",
        "tests/storage/test_tracker_boundaries.py",
        "tests/storage/test_tracker.py",
        "tests/storage/test_tracker_waiting.py",
        "tests/storage/test_notify_policy.py",
    ],
    "agent/pipeline.py": [
        "tests/agent/test_pipeline_units.py",
        "tests/agent/test_pipeline_scope.py",
        "tests/agent/test_pipeline_boundaries.py",
        "tests/agent/test_pipeline_reminders.py",
        "tests/agent/test_scale_up_waiting.py",
        "tests/stream/test_fleet.py",
    ],
}
DEFAULT_TARGETS = ["analyzers/rollout.py", "analyzers/disruption.py", "analyzers/simulator/"]

_COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}


@dataclass(frozen=True, slots=True)
class Mutant:
    function: str  # qualified name within the module
    line: int
    description: str
    index: int  # which mutation point of the function (walk order)


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    return isinstance(parent, ast.Expr) and isinstance(node, ast.Constant) and isinstance(node.value, str)


def _points(
    func: ast.FunctionDef | ast.AsyncFunctionDef, skipped_lines: set[int]
) -> Iterator[tuple[ast.AST, str]]:
    """Mutation points of one function body, in a stable walk order, with a description."""
    in_fstring: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.JoinedStr):
            in_fstring.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.arguments):  # defaults are evaluated once, at definition
            in_fstring.update(id(n) for d in [*node.defaults, *node.kw_defaults] if d for n in ast.walk(d))
        if isinstance(node, ast.AnnAssign):  # annotations are never evaluated (PEP 563)
            in_fstring.update(id(n) for n in ast.walk(node.annotation))
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not func
        ):  # nor a nested def's
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None and a.annotation is not None:
                    in_fstring.update(id(n) for n in ast.walk(a.annotation))
            if node.returns is not None:
                in_fstring.update(id(n) for n in ast.walk(node.returns))
    for stmt in func.body:
        for node in ast.walk(stmt):
            if getattr(node, "lineno", None) in skipped_lines or id(node) in in_fstring:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.Compare):
                for k, op in enumerate(node.ops):
                    if type(op) in _COMPARE_SWAP:
                        yield node, f"compare[{k}] {type(op).__name__} -> {_COMPARE_SWAP[type(op)].__name__}"
            elif isinstance(node, ast.BoolOp):
                yield node, f"{type(node.op).__name__} -> {'Or' if isinstance(node.op, ast.And) else 'And'}"
            elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
                yield node, f"{type(node.op).__name__} -> {_BINOP_SWAP[type(node.op)].__name__}"
            elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
                yield node, f"augmented {type(node.op).__name__} -> {_BINOP_SWAP[type(node.op)].__name__}"
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                yield node, "not x -> x"
            elif isinstance(node, ast.Constant) and type(node.value) is bool:
                yield node, f"{node.value} -> {not node.value}"
            elif isinstance(node, ast.Constant) and type(node.value) is int:
                yield node, f"{node.value} -> {node.value + 1}"


def _apply(node: ast.AST, description: str) -> ast.AST:
    """The replacement of ``node`` for ``description`` (a fresh node)."""
    if isinstance(node, ast.Compare):
        k = int(description.split("]")[0].split("[")[1])
        new = copy.copy(node)
        new.ops = list(node.ops)
        new.ops[k] = _COMPARE_SWAP[type(node.ops[k])]()
        return new
    if isinstance(node, ast.BoolOp):
        return ast.BoolOp(op=ast.Or() if isinstance(node.op, ast.And) else ast.And(), values=node.values)
    if isinstance(node, ast.BinOp):
        return ast.BinOp(left=node.left, op=_BINOP_SWAP[type(node.op)](), right=node.right)
    if isinstance(node, ast.AugAssign):
        return ast.AugAssign(target=node.target, op=_BINOP_SWAP[type(node.op)](), value=node.value)
    if isinstance(node, ast.UnaryOp):
        return node.operand
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        return ast.Constant(value=not node.value)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return ast.Constant(value=node.value + 1)
    raise AssertionError(description)


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level functions and methods of top-level classes, by qualified name."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def _skipped_lines(source: str) -> set[int]:
    return {
        i for i, line in enumerate(source.splitlines(), 1) if line.rstrip().endswith("# pragma: no mutate")
    }


def mutants_of(source: str) -> list[Mutant]:
    tree = ast.parse(source)
    skipped = _skipped_lines(source)
    out = []
    for qualname, func in _functions(tree):
        for index, (node, description) in enumerate(_points(func, skipped)):
            out.append(Mutant(qualname, getattr(node, "lineno", func.lineno), description, index))
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, replacement: ast.AST) -> None:
        self.target, self.replacement = target, replacement

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.replacement
        return super().generic_visit(node)


def mutated_code(source: str, path: str, mutant: Mutant) -> types.CodeType:
    """The code object of ``mutant.function`` with the mutation applied."""
    tree = ast.parse(source)
    skipped = _skipped_lines(source)
    func = dict(_functions(tree))[mutant.function]
    node, description = list(_points(func, skipped))[mutant.index]
    assert description == mutant.description
    _Replace(node, _apply(node, description)).visit(func)
    ast.fix_missing_locations(tree)
    module_code = compile(tree, path, "exec")
    return _find_code(module_code, mutant.function.split("."))


def _find_code(code: types.CodeType, names: list[str]) -> types.CodeType:
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == names[0]:
            if len(names) == 1:
                return const
            return _find_code(const, names[1:])
    raise LookupError(".".join(names))


def _live_function(module: types.ModuleType, qualname: str) -> types.FunctionType:
    obj: object = module
    for part in qualname.split("."):
        obj = vars(obj)[part] if isinstance(obj, type) else getattr(obj, part)
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property) and obj.fget is not None:
        obj = obj.fget
    while hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    assert isinstance(obj, types.FunctionType), qualname
    return obj


def _run_child(module_name: str, code: types.CodeType | None, qualname: str, tests: list[str]) -> int:
    import pytest

    if code is not None:
        module = importlib.import_module(module_name)
        func = _live_function(module, qualname)
        func.__code__ = code
        cache_clear = getattr(getattr(module, qualname.split(".")[0], None), "cache_clear", None)
        if callable(cache_clear):
            cache_clear()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    return int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]))


def _start(module_name: str, code: types.CodeType | None, qualname: str, tests: list[str]) -> int:
    """Fork a child that runs ``tests`` against the mutant (``code``; None: unmutated); its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            status = _run_child(module_name, code, qualname, tests)
        except BaseException:
            status = 99
        os._exit(status)
    return pid


def _outcome(status: int) -> str:
    return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"


def run_tests(
    module_name: str, code: types.CodeType | None, qualname: str, tests: list[str], timeout: float
) -> str:
    """'survived', 'killed' or 'timeout' (baseline: code None)."""
    [(_, outcome)] = run_many(module_name, [(None, code, qualname)], tests, timeout, jobs=1)
    return outcome


def run_many(
    module_name: str,
    work: list[tuple[Mutant | None, types.CodeType | None, str]],
    tests: list[str],
    timeout: float,
    jobs: int,
) -> list[tuple[Mutant | None, str]]:
    """Each (mutant, code, qualified name) of ``work`` tested in its own child, ``jobs`` at a
    time; (mutant, 'survived' | 'killed' | 'timeout') in the order of ``work``."""
    outcomes: dict[int, str] = {}
    running: dict[int, tuple[int, float]] = {}  # pid -> (index in work, deadline)
    queue = list(enumerate(work))
    queue.reverse()
    while queue or running:
        while queue and len(running) < jobs:
            index, (_, code, qualname) = queue.pop()
            running[_start(module_name, code, qualname, tests)] = (index, time.monotonic() + timeout)
        for pid, (index, deadline) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                outcomes[index] = _outcome(status)
            elif time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                outcomes[index] = "timeout"
            else:
                continue
            del running[pid]
        select.select([], [], [], 0.05)
    return [(work[i][0], outcomes[i]) for i in range(len(work))]


def _share_postgres() -> Callable[[], None] | None:
    """When the tests use ``tests/pg.py``'s server, start it once here: every forked child
    inherits it (its start, an initdb, would otherwise cost seconds per mutant). Returns
    what releases it, or None."""
    pg = sys.modules.get("tests.pg")
    if pg is None:
        return None
    try:
        pg.acquire()
    except (pg.PostgresNotFound, RuntimeError, OSError):  # each child then reports it on its own
        return None
    release: Callable[[], None] = pg.release
    return release


def _warm(tests: list[str]) -> None:
    """Collect the tests once in this process, so every forked child finds pytest,
    the conftests and the test modules imported (a child then only runs them)."""
    import pytest

    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1), os.dup(2)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *tests])
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(devnull)


def _modules(target: str) -> list[Path]:
    path = ROOT / target
    if path.is_dir():
        return sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
    return [path]


def _tests_for(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    if rel in TESTS:
        return TESTS[rel]
    for key, tests in TESTS.items():
        if key.endswith("/") and rel.startswith(key):
            return tests
    raise SystemExit(f"no tests known for {rel}: add it to TESTS in bench/mutation.py or pass --tests")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=DEFAULT_TARGETS, help="modules or package folders")
    parser.add_argument("--tests", nargs="+", help="pytest arguments to run instead of the known tests")
    parser.add_argument("--show-survivors", action="store_true", help="list every surviving mutant")
    parser.add_argument("--only", help="only functions whose qualified name contains this")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression for the tests (e.g. 'not postgres')")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--fail-under", type=float, default=0.0, help="exit 1 under this score (percent)")
    args = parser.parse_args(argv)

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    # Import what the tests import once, so every fork starts warm.
    import analyzers.report
    import analyzers.rules  # noqa: F401

    shared: list[Callable[[], None]] = []  # what releases a PostgreSQL server the children share
    try:
        return _run(args, shared)
    finally:
        for release in shared:
            release()


def _run(args: argparse.Namespace, shared: list[Callable[[], None]]) -> int:
    total_killed = total = 0
    started = time.monotonic()
    for target in args.targets:
        for path in _modules(target):
            tests = args.tests or _tests_for(path)
            if args.keyword:
                tests = [*tests, "-k", args.keyword]
            rel = path.relative_to(ROOT).as_posix()
            module_name = rel[:-3].replace("/", ".")
            importlib.import_module(module_name)
            source = path.read_text(encoding="utf-8")
            mutants = [m for m in mutants_of(source) if not args.only or args.only in m.function]
            _warm(tests)
            if not shared and (release := _share_postgres()) is not None:
                shared.append(release)
            t0 = time.monotonic()
            if run_tests(module_name, None, "", tests, 600) != "survived":
                print(f"{rel}: the tests fail without any mutation; fix them first", flush=True)
                return 2
            timeout = max(10.0, 3 * (time.monotonic() - t0) + 5)
            killed = 0
            survivors: list[Mutant] = []
            work: list[tuple[Mutant | None, types.CodeType | None, str]] = []
            for mutant in mutants:
                try:
                    work.append((mutant, mutated_code(source, str(path), mutant), mutant.function))
                except (SyntaxError, ValueError, LookupError):
                    killed += 1  # cannot even be compiled: counts as caught
            for done, outcome in run_many(module_name, work, tests, timeout, args.jobs):
                if outcome == "survived" and done is not None:
                    survivors.append(done)
                else:
                    killed += 1
            n = len(mutants)
            score = 100.0 * killed / n if n else 100.0
            print(f"{rel}: {killed}/{n} mutants killed ({score:.1f}%)", flush=True)
            if args.show_survivors:
                for m in survivors:
                    print(f"    survived  {rel}:{m.line}  {m.function}  {m.description}", flush=True)
            total_killed += killed
            total += n
    score = 100.0 * total_killed / total if total else 100.0
    minutes = (time.monotonic() - started) / 60
    print(f"TOTAL: {total_killed}/{total} mutants killed ({score:.1f}%) in {minutes:.1f} min", flush=True)
    return 1 if score < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
