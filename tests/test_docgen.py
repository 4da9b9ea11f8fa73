"""Generated docs (completions, man page, command reference): no drift, complete, valid roff, working completion."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ocigroup_cli.app import run
from ocigroup_cli.docgen import __main__ as docgen_main
from ocigroup_cli.docgen import drifted, facts, render, roff
from ocigroup_cli.docgen.tree import Command, command_tree
from ocigroup_cli.errors import ExitCode

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "ocigroup_cli"
MAN = REPO / "man" / "ocigroup.1"
SCRIPT = Path(sys.executable).with_name("ocigroup")  # the console script installed in this environment


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return render()


@pytest.fixture(scope="module")
def tree() -> Command:
    return command_tree()


def test_committed_files_match_the_app(files):
    stale = drifted(REPO, files)
    assert not stale, f"generated docs are out of date: {', '.join(stale)}; run `make docs`"


def test_check_names_the_drifted_files(tmp_path, capsys):
    assert docgen_main.main(["--check", "--root", str(tmp_path)]) == 1
    assert set(re.findall(r"^(\S+) is out of date", capsys.readouterr().err, re.M)) == set(render())
    assert docgen_main.main(["--root", str(tmp_path)]) == 0
    assert docgen_main.main(["--check", "--root", str(tmp_path)]) == 0
    (tmp_path / "man" / "ocigroup.1").write_text(".TH OLD 1\n")
    capsys.readouterr()
    assert docgen_main.main(["--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err.splitlines() == ["man/ocigroup.1 is out of date; run: python -m ocigroup_cli.docgen"]


def test_output_is_deterministic(files):
    assert render() == files
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", files["man/ocigroup.1"])  # no generation date


def _help(path: tuple[str, ...], capsys) -> str:
    capsys.readouterr()
    assert run([*path[1:], "--help"]) == 0
    return capsys.readouterr().out


def _section(help_text: str, title: str) -> list[str]:
    """The entries of one section of Click's --help output (indented lines after 'Title:')."""
    lines = help_text.split(f"\n{title}:\n", 1)[1].split("\n\n")[0].splitlines() if f"\n{title}:\n" in help_text else []
    return [line.strip() for line in lines if re.match(r"  \S", line)]


def test_tree_has_every_command_and_option_that_help_shows(tree, capsys):
    """Checked against Click's own --help, not the walker: nothing is missed, nothing invented."""
    for cmd in tree.walk():
        shown = _help(cmd.path, capsys)
        commands = {entry.split()[0] for entry in _section(shown, "Commands")}
        assert {sub.path[-1] for sub in cmd.subcommands} == commands, cmd.name
        names = [entry.split("  ")[0] for entry in _section(shown, "Options")]  # the names, before the help
        options = {name for entry in names for name in re.findall(r"(?<!\S)(--?[\w-]+)", entry)} - {"--help"}
        documented = {name for opt in cmd.options for name in opt.names}
        assert documented == options, cmd.name


def test_man_page_and_reference_cover_every_command_and_option(tree, files):
    man, md = files["man/ocigroup.1"], files["docs/commands.md"]
    assert tree.subcommands, "the tree is empty"
    for cmd in tree.walk():
        if cmd is not tree:
            assert f'.SS "{roff.text(cmd.name)}"' in man
        assert f"## `{cmd.name}`" in md and cmd.usage in md
        for opt in cmd.options:
            for name in opt.names:
                assert roff.bold(name) in man, name
                assert f"`{name}" in md or f" {name}" in md or f"/ {name}" in md, name
        for arg in cmd.arguments:
            assert roff.italic(arg.label) in man


def test_man_page_escapes_roff(files):
    known = {".TH", ".SH", ".SS", ".PP", ".TP", ".RS", ".RE", ".nf", ".fi"}
    for line in files["man/ocigroup.1"].splitlines()[1:]:
        if line.startswith((".", "'")):
            assert line.split()[0] in known, line
        assert not re.search(r"(?<!\\)-", line.replace("\\-", "")), f"unescaped hyphen: {line}"
        assert line.isascii() and line.strip(), repr(line)
    assert roff.text(".hidden") == "\\&.hidden" and roff.text("'q") == "\\&'q"
    assert roff.text("a\\b --x") == "a\\eb \\-\\-x"
    assert roff.text("≥ 1 — ok") == "\\[u2265] 1 \\[u2014] ok"


@pytest.mark.skipif(not shutil.which("groff"), reason="groff is not installed (apt-get install groff)")
def test_groff_reports_no_warnings():
    done = subprocess.run(["groff", "-man", "-ww", "-z", str(MAN)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.skipif(not shutil.which("man"), reason="man is not installed")
def test_man_renders(tree):
    env = {**os.environ, "MANWIDTH": "100", "MANPAGER": "cat", "PAGER": "cat", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(["man", "-l", str(MAN)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    for heading in (
        "NAME",
        "SYNOPSIS",
        "GLOBAL OPTIONS",
        "COMMANDS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "EXAMPLES",
    ):
        assert re.search(rf"^{heading}$", done.stdout, re.M), heading
    for cmd in tree.walk():
        assert cmd.name in done.stdout
    assert "--fail-on-time-lag" in done.stdout  # \- renders as a plain minus


def test_exit_status_matches_the_error_tree_and_readme(files):
    documented = [code for code, _ in facts.exit_codes()]
    assert documented == [int(code) for code in ExitCode]
    table = (REPO / "README.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert [int(n) for n in re.findall(r"^\| (\d+) \|", table, re.M)] == documented
    man = files["man/ocigroup.1"].split(".SH EXIT STATUS", 1)[1].split(".SH ", 1)[0]
    assert re.findall(r"^\\fB(\d+)\\fR$", man, re.M) == [str(code) for code in documented]


# --- the hand-written pages: README (install, runbook, exit codes first) and docs/ --------------------------------

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _prose(page: Path) -> list[str]:
    """The page's lines outside fenced code blocks (a `# comment` in a shell block is not a heading)."""
    lines, fenced = [], False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2… for repeats."""
    anchors, seen = set(), dict[str, int]()
    for line in _prose(page):
        if heading := re.match(r"#{1,6} (.+)", line):
            slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            anchors.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
    return anchors


def _links(page: Path) -> list[str]:
    text = re.sub(r"`[^`]*`", "", "\n".join(_prose(page)))  # inline code is not a link
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(page):
    links = [link for link in _links(page) if not re.match(r"[a-z][a-z0-9+.-]*:", link)]  # not https:, mailto:
    assert links or page.name != "README.md"
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or (anchor and (target.suffix != ".md" or anchor not in _anchors(target))):
            broken.append(link)
    assert not broken, f"{page.name}: links to missing files or headings: {broken}"


def test_readme_starts_with_the_runbook_and_links_every_page():
    """Someone just paged reads the install, the first commands, the recipes and the exit codes in 150 lines;
    the reference lives in docs/, each page linked from the README."""
    head = "\n".join((REPO / "README.md").read_text().splitlines()[:150])
    for text in ("## Install and first commands", "inspect billing --health", "tail billing", "## Runbook recipes"):
        assert text in head, text
    exit_codes = head.split("## Exit codes", 1)[-1]
    assert "| 130 |" in exit_codes, "the exit code table ends past line 150"
    linked = {link.partition("#")[0] for link in _links(REPO / "README.md")}
    assert {f"docs/{p.name}" for p in PAGES if p.parent.name == "docs"} <= linked


def test_ci_runs_the_test_command_the_readme_gives():
    ci = (REPO / ".ci" / "run").read_text().splitlines()[-1].strip()
    readme = (REPO / "README.md").read_text()
    assert ci == "make test" and re.search(r"^make test +# what CI runs", readme, re.M)


def _package_sources() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "docgen" not in p.parts]


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _environment_reads(tree: ast.AST) -> set[str]:
    """Names in os.environ.get("X"), os.getenv("X"), os.environ["X"] (read) and "X" in os.environ."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            if isinstance(func, ast.Attribute) and (
                (func.attr == "get" and _is_environ(func.value)) or func.attr == "getenv"
            ):
                found.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant):
                found.add(node.slice.value)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and _is_environ(node.comparators[0]):
            found.add(node.left.value)
    return found


def test_every_environment_variable_the_package_reads_is_documented(files):
    names = set()
    for path in _package_sources():
        tree = ast.parse(path.read_text())
        names |= _environment_reads(tree)
        for node in ast.walk(tree):  # also read through a mapping parameter, as config.resolve(env=...) does
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
            if re.fullmatch(r"OCIGROUP_[A-Z0-9_]+|XDG_[A-Z_]+|NO_COLOR|OCI_[A-Z0-9_]+|REQUESTS_CA_BUNDLE", text):
                names.add(text)
    from ocigroup_cli.config import SCHEMA, env_name

    names |= {env_name(key) for key in SCHEMA}
    assert {"OCIGROUP_CONFIG", "OCIGROUP_STATE_DIR", "OCIGROUP_LOCAL_PORT", "NO_COLOR", "XDG_STATE_HOME"} <= names
    env = files["man/ocigroup.1"].split(".SH ENVIRONMENT", 1)[1].split(".SH ", 1)[0]
    documented = {name.replace("\\-", "-") for name in re.findall(r"^\\fB([A-Z0-9_\\-]+)\\fR$", env, re.M)}
    assert names <= documented, sorted(names - documented)


def test_every_state_file_is_documented():
    named = set()
    for path in _package_sources():
        named |= set(re.findall(r'(?<![.\w])(?:state_dir|home)\(\) / "([^"]+)"', path.read_text()))
    assert {"emulator.db", "crash.log", "resets"} <= named  # the search itself works
    documented = " ".join(f.path for f in facts.FILES)
    missing = [name for name in named if not re.search(rf"(^|[ /,]){re.escape(name)}\b", documented)]
    assert not missing


@pytest.mark.parametrize("example", facts.EXAMPLES, ids=lambda e: e.command)
def test_examples_parse(example, capsys):
    """Each example names real commands and options (with --help appended, nothing runs)."""
    code = run([*shlex.split(example.command), "--help"])
    assert code == 0, capsys.readouterr().err


# --- completion, through the installed console script and its error boundary -------------------------------------

needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason=f"no console script next to {sys.executable}")


def _shell_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@needs_script
def test_completion_protocol_through_the_entry_point():
    env = {**os.environ, "_OCIGROUP_COMPLETE": "complete_bash", "COMP_WORDS": "ocigroup in", "COMP_CWORD": "1"}
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.split(), done.stderr) == (0, ["inspect"], "")


@needs_script
@pytest.mark.parametrize("words", ["ocigroup tail --", "ocigroup inspect --", "ocigroup emulator serve --"])
def test_fish_candidates_are_one_line_each_however_long_their_help(words):
    """fish takes each line of the answer for a candidate: a help that Rich wrapped at 80 columns made candidates
    such as "(--format)." of its own."""
    env = {**os.environ, "_OCIGROUP_COMPLETE": "complete_fish", "_TYPER_COMPLETE_FISH_ACTION": "get-args",
           "_TYPER_COMPLETE_ARGS": words, "COLUMNS": "80"}  # fmt: skip
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) > 10, done.stderr
    assert [line for line in lines if not re.fullmatch(r"-[^\t ]+(\t.+)?", line)] == []


@needs_script
@pytest.mark.skipif(not shutil.which("bash"), reason="bash is not installed")
def test_bash_completion_script(tree):
    words = ["ocigroup in", "ocigroup tail --max", "ocigroup emulator s", "ocigroup --version ", "ocigroup -p x re"]
    script = [f"source {shlex.quote(str(REPO / 'completions' / 'ocigroup.bash'))}"]
    for line in words:
        items = shlex.split(line) + ([""] if line.endswith(" ") else [])
        script += [
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in items)}); COMP_CWORD={len(items) - 1}",
            '_ocigroup_completion ocigroup; echo "${COMPREPLY[*]}"',
        ]
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", "\n".join(script)],
        env=_shell_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[:2] == ["inspect", "--max-messages"]
    assert sorted(lines[2].split()) == ["serve", "start", "status", "stop"]
    assert set(lines[3].split()) == {sub.path[-1] for sub in tree.subcommands}  # --version prints nothing here
    assert lines[4] == "reset"


@needs_script
@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_zsh_completion_script_from_fpath():
    # compsys is stubbed: _arguments prints what it gets; the file is autoloaded from $fpath as compinit does,
    # and called twice because the first call redefines the function
    script = f"""
        fpath=({shlex.quote(str(REPO / "completions"))} $fpath)
        autoload -Uz _ocigroup
        _arguments() {{ print -r -- "$@" }}
        compdef() {{ print -r -- "compdef $*" }}
        words=(ocigroup in); CURRENT=2; _ocigroup
        words=(ocigroup cursor create --ty); CURRENT=4; _ocigroup
    """
    done = subprocess.run(["zsh", "-f", "-c", script], env=_shell_env(), capture_output=True, text=True, timeout=120)
    assert done.stderr == ""
    first, second = done.stdout.splitlines()
    assert first.startswith('*: :(("inspect":') and second.startswith('*: :(("--type":')


@needs_script
@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed")
def test_fish_completion_script():
    script = f"""
        source {shlex.quote(str(REPO / "completions" / "ocigroup.fish"))}
        complete -C 'ocigroup in'
        complete -C 'ocigroup streams create x --par'
    """
    done = subprocess.run(
        ["fish", "--no-config", "-c", script], env=_shell_env(), capture_output=True, text=True, timeout=120
    )
    assert done.stderr == ""
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["inspect", "--partitions"]
