"""Generated documentation: shell completions, the man page and the Markdown command reference.

`python -m ocigroup_cli.docgen` writes them; `--check` reports drift. Nothing in the CLI imports this package, so
it costs `ocigroup --help` nothing; the app itself is imported only when the files are rendered.
"""

from __future__ import annotations

from pathlib import Path


def render() -> dict[str, str]:
    """Every generated file: path relative to the repository root -> content."""
    from ocigroup_cli import __version__
    from ocigroup_cli.docgen import completion, markdown, roff
    from ocigroup_cli.docgen.tree import command_tree

    root = command_tree()
    files = {f"completions/{name}": completion.script(shell) for shell, name in completion.FILES.items()}
    files["man/ocigroup.1"] = roff.man_page(root, __version__, _summary() or root.summary)
    files["docs/commands.md"] = markdown.reference(root, __version__)
    return files


def write(root: Path, files: dict[str, str]) -> list[str]:
    """Write the files under `root`; returns those whose content changed."""
    changed = []
    for rel, content in files.items():
        path = root / rel
        if not path.is_file() or _read(path) != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            changed.append(rel)
    return changed


def drifted(root: Path, files: dict[str, str]) -> list[str]:
    """The files under `root` that are missing or differ from what would be generated."""
    return [rel for rel, content in files.items() if not (root / rel).is_file() or _read(root / rel) != content]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _summary() -> str:
    """The package's one-line description (pyproject's `description`), for the man page's NAME line."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        return str(metadata("ocigroup")["Summary"] or "")
    except PackageNotFoundError:
        return ""
