"""The layout stays readable: imports flow down the layers, no cycles, types check, lint clean."""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tracegen"

LAYERS: dict[str, int] = {
    "errors": 0,
    "schema": 0,
    "jsonl": 0,
    "config": 0,
    "data": 0,
    "terminal": 0,
    "cores": 0,
    "parsing": 1,
    "grading": 1,
    "sandbox": 1,
    "llm": 1,
    "problems": 1,
    "episode": 2,
    "modes": 3,
    "generate": 4,
    "export": 4,
    "views": 4,
    "cli": 5,
    "atropos": 5,
    "trl": 5,
    "openenv": 5,
    "verifiers_env": 5,
    "nemo_gym": 5,
    "serve": 5,
    "__init__": 0,
    "__main__": 6,
}
"""Each top-level module or package of tracegen and its layer (the package's own
``__init__`` holds only the version, so anything may read it): a module may import from its
own layer's packages (without cycles) and from layers below, never from a layer above."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n == "tracegen" or n.startswith("tracegen.")}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_top_level_module_has_a_layer() -> None:
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    tops -= {"__pycache__", "_data", "py"}
    assert tops <= set(LAYERS), f"give {sorted(tops - set(LAYERS))} a layer in LAYERS"


def test_imports_only_flow_down_the_layers() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        here = rel.parts[0].removesuffix(".py")
        for module in _imports(path):
            there = _top(module)
            if LAYERS[there] > LAYERS[here]:
                upward.append(f"{rel} imports {module}")
    assert not upward, "\n".join(upward)


def _module_graph() -> dict[str, set[str]]:
    """Module → the tracegen modules it imports (``from pkg import mod`` counts ``pkg.mod``;
    a module importing a package it belongs to does not count)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("tracegen", *path.relative_to(PACKAGE).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
        graph[name] = {
            t for t in targets if t in modules and t != name and not name.startswith(t + ".")
        }
    return graph


def test_no_import_cycles() -> None:
    try:
        tuple(TopologicalSorter(_module_graph()).static_order())
    except CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_status_and_merge_are_modules_of_their_own() -> None:
    """`tracegen status` and `tracegen merge` share what a shard's files are
    (`generate.shards`), never each other: status reads no merge code, merge no status."""
    graph = _module_graph()
    status, merge = "tracegen.generate.status", "tracegen.generate.merge"
    assert merge not in graph[status] and status not in graph[merge]
    assert "tracegen.generate.shards" in graph[status] & graph[merge]


WORKER = PACKAGE / "generate" / "worker.py"
SANDBOX_PACKAGE = PACKAGE / "sandbox"
ENGINE = PACKAGE / "episode" / "engine.py"


def _calls(path: Path, name: str) -> bool:
    """Whether ``path`` calls something called ``name`` (``name(...)`` or ``x.name(...)``)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            called = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            if called == name:
                return True
    return False


def test_only_the_worker_builds_a_sandbox_or_runs_an_episode() -> None:
    """Every entry point (the run command, the local and Ray executors, `tracegen verify`, the
    Atropos and TRL environments, the next adapter) runs its episodes and executions through
    `tracegen.generate.worker.EpisodeWorker`: nothing else builds a `Sandbox` or calls
    `run_episode`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in (WORKER, ENGINE) or SANDBOX_PACKAGE in path.parents:
            continue
        for name in ("Sandbox", "run_episode"):
            if _calls(path, name):
                found.append(f"{path.relative_to(PACKAGE)} calls {name}")
    assert not found, "\n".join(found)


def test_every_entry_point_starts_from_the_run_setup() -> None:
    """The run command and the RL environments decide a run with `prepare` (one `RunSetup`;
    TRL, whose trainer samples the policy, its mode and problems through the setup's `Named`),
    and run episodes on an `EpisodeWorker`."""
    graph = _module_graph()
    for entry in (
        "tracegen.generate.run",
        "tracegen.atropos.env",
        "tracegen.generate.handoff",
        "tracegen.trl.environment",
    ):
        assert "tracegen.generate.setup" in graph[entry], entry
    for entry in (
        "tracegen.generate.handoff",
        "tracegen.generate.local_executor",
        "tracegen.generate.ray_executor",
        "tracegen.atropos.env",
        "tracegen.trl.environment",
    ):
        assert "tracegen.generate.worker" in graph[entry], entry


def test_modes_ask_for_capabilities_never_which_backend_answered() -> None:
    """A mode reads what a backend can do (`Capabilities`, a completion's flags), never which
    backend it is: no mode imports a backend's module."""
    backends = {"tracegen.llm.local", "tracegen.llm.ollama", "tracegen.llm.openai"}
    found = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted((PACKAGE / "modes").glob("*.py"))
        for module in _imports(path) & backends
    ]
    assert not found, "\n".join(found)


def test_backend_kinds_are_asked_for_their_flags_never_compared_by_name() -> None:
    """What a backend kind is (runs the model in this process, what it can do) is declared on
    its entry of `tracegen.llm.factory.BACKENDS`: no module compares a ``backend`` or a pool's
    ``kind`` with a kind's name (``settings.backend == "local"``)."""
    from tracegen.llm.factory import BACKENDS

    def names_backend(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in ("backend", "kind")

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            named = any(isinstance(o, ast.Constant) and o.value in BACKENDS for o in operands)
            if named and any(names_backend(o) for o in operands):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, "ask the backend's entry (runs_in_process…): " + ", ".join(found)


def test_views_only_show() -> None:
    """A view (`tracegen.views`) shows what it is given or reads: it runs nothing (no
    sandbox, no executor, no run) and decides no settings; the command's library function
    (`tracegen.generate.verify`…) builds the run and hands the view what to show."""
    found = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted((PACKAGE / "views").rglob("*.py"))
        for module in _imports(path)
        if _top(module) in ("sandbox", "generate", "llm", "episode", "modes", "config")
    ]
    assert not found, "\n".join(found)


def test_a_flag_reaches_the_worker_through_the_settings_and_the_setup() -> None:
    """A setting goes one way, CLI → settings → setup → worker: a command module builds its
    `RunSettings` from its flags (`tracegen.config.load_settings`) and hands them on; below
    the CLI, no module makes settings from loose values again (no `load_settings`, no
    `RunSettings(...)` or `model_validate`), except the RL adapters, which read their
    trainer's configuration, and none rebuilds them (``settings.model_copy``): what a run
    decides instead of a setting (the backend kind and model ``--backend auto`` settles on,
    a first run's problems and preset, constrain, the tool parser) is recorded on
    `tracegen.generate.setup.RunSetup` and its header, and the generation settings it
    decided are made in one place, `RunSetup`'s (``settings.generation(...)``)."""
    entry = {"cli", "atropos", "trl", "openenv", "verifiers_env", "nemo_gym", "serve", "config"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0].removesuffix(".py") in entry:
            continue
        rel = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            called = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            owner = (
                f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            )
            receiver = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
            if called in ("load_settings", "RunSettings") or (
                called == "model_validate" and owner == "RunSettings"
            ):
                found.append(f"{rel}:{node.lineno} calls {called}")
            elif called == "model_copy" and receiver.endswith("settings"):
                found.append(f"{rel}:{node.lineno} rebuilds settings with model_copy")
            elif called == "generation" and receiver.endswith("settings") and rel != SETUP:
                found.append(f"{rel}:{node.lineno} decides generation settings outside {SETUP}")
    assert not found, "\n".join(found)


SETUP = "generate/setup.py"
"""Where a run's decisions are made, once (`tracegen.generate.setup.prepare`)."""


def test_what_a_server_failure_stops_is_read_off_the_error() -> None:
    """No module catches a kind of server failure by its class: what a failure stops
    (`BackendError.stops`), whether it is retried (``retryable``), what it says of its host
    (``host_fault``), whether the server answered at all (``answered``) and the rest are read
    off the error, declared once on its type in errors.py."""
    import tracegen.errors as errors

    kinds = {
        name
        for name, kind in vars(errors).items()
        if isinstance(kind, type) and issubclass(kind, errors.BackendError)
    } - {"BackendError"}
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            caught: list[ast.expr] = []
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = list(node.type.elts) if isinstance(node.type, ast.Tuple) else [node.type]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
                caught = node.args[1:]
            for name in caught:
                if isinstance(name, ast.Name) and name.id in kinds:
                    found.add((rel, name.id))
    assert not found, sorted(found)


def test_every_console_is_the_sanitising_one() -> None:
    """Tables and panels reach the terminal through `tracegen.terminal`'s console, which escapes
    control and bidirectional characters: no other module makes a Rich console."""
    made = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "terminal.py"
        and SANDBOX_PACKAGE not in path.parents
        and _calls(path, "Console")
    ]
    assert not made, "make consoles with tracegen.terminal.console: " + ", ".join(made)


def test_every_table_is_drawn_by_the_one_helper() -> None:
    """Commands draw tables with `tracegen.terminal.text_table`, whose cells are text by
    default, never markup: no other module makes a Rich `Table`."""
    made = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "terminal.py" and _calls(path, "Table")
    ]
    assert not made, "draw tables with tracegen.terminal.text_table: " + ", ".join(made)


@pytest.mark.slow
def test_types_check() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "src"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:]


def test_lint_and_format_are_clean() -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout[-4000:]
