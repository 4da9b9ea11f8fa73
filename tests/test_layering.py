"""Dependencies point one way (see docs/design.md): this test parses every import and checks the arrows."""

from __future__ import annotations

import ast
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ocigroup_cli"

# room -> project rooms it must never import
FORBIDDEN = {
    "core": {"client", "ops", "commands", "emulator", "export", "app", "console", "errors", "paths", "config"},
    "emulator": {"client", "ops", "commands", "export", "app", "console", "errors", "paths"},
    "client": {"ops", "commands", "emulator", "export", "app", "console"},
    "ops": {"commands", "emulator", "export", "app", "console", "instance", "cli", "views"},
    "instance": {"commands", "emulator", "export", "app", "console", "cli", "views"},
    "export": {"ops", "commands", "emulator", "app", "console"},
    "commands": {"client", "emulator", "export"},  # commands parse, call ops (or their own engine) and render
    "cli": {"client", "emulator", "export", "commands", "views"},  # the frame commands share
    "views": {"client", "emulator", "export", "commands", "app"},  # what commands show and where they send it
    # IAM's tables and grammar: pure, for the emulator, the client's hints and the doctor alike
    "iam": {
        *("client", "ops", "commands", "emulator", "export", "app", "console", "errors", "paths", "config"),
        *("instance", "cli", "views", "yamlfile", "inputs"),
    },
}
# the one command module that may reach into a room commands otherwise may not: its own engine
ENGINE_OF = {"commands/emulator.py": "emulator", "commands/export.py": "export"}
# third-party packages allowed only in these rooms (docgen renders the docs from the Typer app; nothing imports it);
# the export extra's (pyspark, pyarrow, pandas, numpy, grpc: `ocigroup[export]`) only in export/, which an install
# without them never imports (commands/export.py says how to add them first)
THIRD_PARTY = {
    "typer": {"app", "commands", "console", "docgen", "cli", "views"},
    "rich": {"app", "commands", "console", "fitted", "views"},  # fitted: the console's table for narrow terminals
    "oci": {"client", "export"},
    **{extra: {"export"} for extra in ("pyspark", "pyarrow", "pandas", "numpy", "grpc")},
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def room(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_arrows_point_one_way():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = room(path)
        forbidden = FORBIDDEN.get(here, set()) - {ENGINE_OF.get(path.relative_to(PACKAGE).as_posix(), "")}
        for name in imports(path):
            parts = name.split(".")
            if parts[0] == "ocigroup_cli" and len(parts) > 1 and parts[1] in forbidden:
                problems.append(f"{path.relative_to(PACKAGE)} ({here}) imports {name}")
            allowed = THIRD_PARTY.get(parts[0])
            if allowed is not None and here not in allowed:
                problems.append(f"{path.relative_to(PACKAGE)} ({here}) imports third-party {parts[0]}")
    assert not problems, "\n".join(problems)


def test_core_uses_only_the_standard_library():
    import sys

    for path in (PACKAGE / "core").rglob("*.py"):
        for name in imports(path):
            top = name.split(".")[0]
            # pybase64: binascii's base64 in SIMD, a codec with no state or I/O (tail's CPU per message)
            allowed = ("__future__", "ocigroup_cli", "pybase64")
            assert top in sys.stdlib_module_names or top in allowed, f"{path.name}: {name}"


def test_help_does_not_import_oci_or_pyspark():
    import subprocess
    import sys

    code = (
        "import sys; from ocigroup_cli.app import run; run(['--help']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('oci', 'pyspark', 'pyarrow', 'pandas', 'numpy', 'grpc') or m.startswith('ocigroup_cli.docgen')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip().splitlines()[-1] == "[]"


def _commands_loaded(*argv: str) -> list[str]:
    import subprocess
    import sys

    code = (
        f"import json, sys; from ocigroup_cli.app import run; run({list(argv)!r}); "
        "print(json.dumps(sorted(m.split('.', 1)[1] for m in sys.modules if m.split('.')[:2] in "
        "(['ocigroup_cli', 'commands'], ['ocigroup_cli', 'cli'], ['ocigroup_cli', 'views']) and m.count('.') == 2)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_command_imports_its_own_module_only():
    """cli/lazy.py: the command list needs no command module; a command, its own (and what it imports)."""
    from ocigroup_cli.app import Commands

    assert _commands_loaded("--help") == ["cli.lazy", "cli.options"]
    assert _commands_loaded("inspect", "--help") == ["cli.lazy", "cli.options", "commands.inspect", "views.all_groups",
                                                     "views.group", "views.outage", "views.sinks"]  # fmt: skip
    assert _commands_loaded("streams", "--help") == ["cli.lazy", "cli.options", "commands.streams"]
    assert {"tail", "reset", "export", "emulator"} <= set(Commands.table)


def test_functions_stay_short():
    """No function of the package is over 60 lines, its signature and decorators included."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.end_lineno is not None and node.end_lineno - first + 1 > 60:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not long, long


EMULATOR_SERVICES = ("streaming", "objectstorage", "monitoring")


def test_each_emulator_service_stands_on_the_shared_core_alone():
    """emulator/__init__.py: a service imports `shared/` and itself, never another service or what composes them
    (api, admin, server); `shared/` imports no service."""
    emulator = PACKAGE / "emulator"
    composers = {"api", "admin", "server"}
    problems = []
    for folder in ("shared", *EMULATOR_SERVICES):
        assert (emulator / folder / "__init__.py").read_text().strip(), f"emulator/{folder} says nothing of itself"
        others = set(EMULATOR_SERVICES) - {folder}
        for path in sorted((emulator / folder).rglob("*.py")):
            for name in imports(path):
                parts = name.split(".")
                if parts[:2] == ["ocigroup_cli", "emulator"] and len(parts) > 2 and parts[2] in others | composers:
                    problems.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not problems, "\n".join(problems)
    flat = sorted(p.name for p in emulator.glob("*.py"))
    assert flat == ["__init__.py", "admin.py", "api.py", "server.py"], flat


def _is_status(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in ("status", "status_code")) or (
        isinstance(node, ast.Name) and node.id in ("status", "status_code")
    )


def _http_codes(node: ast.expr) -> bool:
    values = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return any(isinstance(v, ast.Constant) and isinstance(v.value, int) and 100 <= v.value <= 599 for v in values)


def test_only_the_client_and_the_emulator_compare_http_statuses():
    """Everything else reacts to the client's typed errors (errors.py: NotFound, PreconditionFailed, AuthFailed …)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if room(path) in ("client", "emulator"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_status(s) for s in sides) and any(_http_codes(s) for s in sides):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, found
