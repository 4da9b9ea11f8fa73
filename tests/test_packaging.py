"""Export's dependencies (Spark, Arrow, pandas, numpy) are an extra, `ocigroup[export]`: an on-call host that only
tails and inspects installs without them, and there `ocigroup export` says in one line how to add them (exit 2).

The install without the extra is a fresh virtual environment (no system site-packages) holding exactly the
distributions that pyproject.toml's core dependencies need (from their installed metadata), each linked from this
environment, the package, and its console script as pip writes it: what the command sees is what a core install
gives it (the export extra's modules absent: `importlib.util.find_spec` finds none), in a second. A real
`pip install .` into a fresh venv takes 45 to 97 s of the suite's two cores here, 38 to 43 s of it CPU, and
reaches the package index (docs/benchmarks.md, "What each dependency costs").
"""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.errors import ExitCode
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

REPO = Path(__file__).resolve().parent.parent
EXPORT_ONLY = {"pyspark", "pyarrow", "pandas", "numpy"}


def test_export_dependencies_are_an_extra_that_make_installs():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {Requirement(r).name for r in project["dependencies"]}
    extra = {Requirement(r).name for r in project["optional-dependencies"]["export"]}
    assert not core & EXPORT_ONLY and extra == EXPORT_ONLY
    assert "-e '.[export,test,dev]'" in (REPO / "Makefile").read_text()  # make test, make demo and CI


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions that `requirements` need (each with the extras it asks for), from their
    metadata: what pip would install for them."""
    seen: set[str] = set()
    todo = [Requirement(text) for text in requirements]
    while todo:
        req = todo.pop()
        key = req.name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for text in md.requires(req.name) or []:
            need = Requirement(text)
            if need.marker is None or any(need.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                todo.append(need)
    return seen


def core_install(root: Path) -> Path:
    """A fresh venv holding ocigroup and its core dependencies only; its `ocigroup` console script."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=60)
    site = root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    linked: set[str] = set()
    core = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for dist in sorted(_closure(core)):
        for file in md.distribution(dist).files or []:
            top = file.parts[0]
            if top != ".." and top not in linked and top != "__pycache__":
                linked.add(top)
                (site / top).symlink_to(Path(str(file.locate())).parents[len(file.parts) - 1] / top)
    (site / "ocigroup_cli").symlink_to(REPO / "ocigroup_cli")
    assert not {t.split(".")[0] for t in linked} & EXPORT_ONLY, linked
    main = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["ocigroup"]
    module, func = main.split(":")  # ocigroup_cli.app:main
    script = root / "bin" / "ocigroup"
    script.write_text(
        f"#!{root / 'bin' / 'python'}\nimport sys\nfrom {module} import {func}\n"
        f"if __name__ == '__main__':\n    sys.exit({func}())\n"
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def live(api_key):
    server = start_server(api_key, SystemClock())
    yield Sdk(server, api_key)
    server.stop()


def test_an_install_without_the_export_extra_refuses_export_in_one_line(tmp_path, live, api_key):
    script = core_install(tmp_path / "venv")
    probe = f"import importlib.util as u; print([m for m in {sorted(EXPORT_ONLY)} if u.find_spec(m)])"
    found = subprocess.run([script.parent / "python", "-c", probe], capture_output=True, text=True, timeout=30)
    assert found.stdout.strip() == "[]", found.stderr  # the install really lacks them
    live.stream(partitions=2, name="orders")
    config = write_config(tmp_path, api_key, live.url)
    env = proc.clean_env(tmp_path / "state")

    def ocigroup(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([script, "--config", config, *args], env=env, capture_output=True, text=True, timeout=60)

    for args in (["publish", "hello"], ["tail", "billing", "--from", "earliest", "-n", "1"], ["inspect", "billing"]):
        done = ocigroup("-o", "json", *args)  # what an on-call host does works without the extra
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    for args in (
        ["export", "--partition", "0", "--from-offset", "0", "--to-offset", "0", "--out", str(tmp_path / "out")],
        ["export", "verify", str(tmp_path / "out")],
    ):
        done = ocigroup(*args)
        assert done.returncode == ExitCode.USAGE and done.stdout == "", done.stderr
        error, hint = done.stderr.strip().splitlines()  # the error in one line, and how to fix it
        assert error.startswith("error: export needs ") and "Traceback" not in done.stderr, done.stderr
        assert "pipx install --force '.[export]'" in hint, hint
    assert not (tmp_path / "out").exists()
