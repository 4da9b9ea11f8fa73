"""The command tree read from the Typer app through Click: every visible command, option and argument."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

# placeholder shown after an option that takes a value, by Click type name
_PLACEHOLDERS = {
    "str": "TEXT",
    "text": "TEXT",
    "int": "N",
    "int range": "N",
    "float": "NUMBER",
    "float range": "NUMBER",
}
_PLACEHOLDERS |= {"path": "PATH", "file": "FILE", "filename": "FILE"}


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]  # short forms first: ("-n", "--max-messages")
    negations: tuple[str, ...]  # ("--no-commit-on-get",) for on/off flags
    placeholder: str | None  # None for flags that take no value
    help: str  # as `--help` shows it, with Typer's [default: …] and range notes

    @property
    def names(self) -> tuple[str, ...]:
        return self.flags + self.negations


@dataclass(frozen=True)
class Argument:
    name: str  # upper case, as the help texts refer to it (GROUP)
    required: bool
    variadic: bool
    help: str

    @property
    def label(self) -> str:
        return self.name + ("..." if self.variadic else "")

    @property
    def usage(self) -> str:
        return self.label if self.required else f"[{self.label}]"


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]  # ("ocigroup", "cursor", "create")
    help: str
    options: tuple[Option, ...]
    arguments: tuple[Argument, ...]
    subcommands: tuple[Command, ...]

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def summary(self) -> str:
        """The first paragraph of the help, on one line."""
        return " ".join(self.help.split("\n\n")[0].split())

    @property
    def paragraphs(self) -> list[str]:
        """The help's paragraphs, without click's no-rewrap marker (a line of one \\b before a block)."""
        paragraphs = (
            "\n".join(line for line in p.splitlines() if line.strip() != "\b") for p in self.help.split("\n\n")
        )
        return [p for p in paragraphs if p.strip()]

    @property
    def usage(self) -> str:
        parts = [self.name, "[OPTIONS]"] + [a.usage for a in self.arguments]
        if self.subcommands:
            parts.append("COMMAND [ARGS]...")
        return " ".join(parts)

    def walk(self) -> Iterator[Command]:
        """This command, then every command below it, depth first in name order."""
        yield self
        for sub in self.subcommands:
            yield from sub.walk()


def _flags(opts: list[str]) -> tuple[str, ...]:
    return tuple(sorted(opts, key=lambda o: len(o) - len(o.lstrip("-"))))


def _param(param: Any, ctx: Any) -> Option | Argument | None:
    if getattr(param, "hidden", False):
        return None
    record = param.get_help_record(ctx)
    text = " ".join((record[1] if record else getattr(param, "help", None) or "").split())
    if param.param_type_name == "argument":
        return Argument(str(param.name).upper(), bool(param.required), param.nargs == -1, text)
    choices = getattr(param.type, "choices", None)
    placeholder = None
    if not param.is_flag:
        placeholder = (
            "|".join(map(str, choices)) if choices else _PLACEHOLDERS.get(param.type.name, param.type.name.upper())
        )
    return Option(_flags(param.opts), tuple(param.secondary_opts), placeholder, text)


def _command(cmd: Any, ctx: Any, path: tuple[str, ...]) -> Command:
    options: list[Option] = []
    arguments: list[Argument] = []
    for param in cmd.params:
        found = _param(param, ctx)
        if isinstance(found, Option):
            options.append(found)
        elif isinstance(found, Argument):
            arguments.append(found)
    subs = []
    if hasattr(cmd, "list_commands"):
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                sub_ctx = type(ctx)(sub, info_name=name, parent=ctx)
                subs.append(_command(sub, sub_ctx, (*path, name)))
    text = inspect.cleandoc(cmd.help or "").split("\f")[0].strip()
    return Command(path, text, tuple(options), tuple(arguments), tuple(subs))


def command_tree(app: typer.Typer | None = None, prog: str = "ocigroup") -> Command:
    """The tree of `app` (default: the ocigroup app, imported here so nothing else pays for it)."""
    import typer.main

    if app is None:
        from ocigroup_cli.app import app as ocigroup_app

        app = ocigroup_app
    root = typer.main.get_command(app)
    return _command(root, typer.Context(root, info_name=prog), (prog,))
