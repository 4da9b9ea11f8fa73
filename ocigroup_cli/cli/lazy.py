"""A Typer command group whose commands' modules are imported when a command is used, not at every start.

Typer builds the whole click tree before it parses a word: every command module imported, every parameter of
every command converted (`--help` took 0.17 to 0.21 s that way, 0.09 to 0.11 s this way on the same host;
docs/benchmarks.md "CLI details"). This group
names its commands with their one-line help; a command's module is imported and its click command built only
when that command runs, shows its help or is completed. The command list of `--help` comes from the table.
Typer has no lazy loading of its own; click documents this pattern (a Group overriding `get_command` and
`list_commands`), and Typer's own builders turn the imported app or function into the click command.
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from typing import ClassVar, NamedTuple

import typer
from typer._click import Command, Context, HelpFormatter
from typer._click.exceptions import UsageError
from typer.core import TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo


class Lazy(NamedTuple):
    """A command: `attr` of `module`, a Typer app (a group of commands) or a command function."""

    module: str
    attr: str
    short_help: str  # the command list shows it whole (click would cut a docstring's first sentence to fit)


class LazyGroup(TyperGroup):
    """Subclass it with `table` set, and give it to `typer.Typer(cls=…)` (whose own commands stay eager)."""

    table: ClassVar[dict[str, Lazy]] = {}
    rich_markup: ClassVar[typer.core.MarkupMode] = None  # as the Typer app that uses this group sets them
    short_exceptions: ClassVar[bool] = True

    def list_commands(self, ctx: Context) -> list[str]:
        return [*(name for name in super().list_commands(ctx) if name not in self.table), *self.table]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in self.table:
            self.commands[cmd_name] = self._build(cmd_name, self.table[cmd_name])
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        """As Typer's, with its "Did you mean" drawn from every command (Typer's looks at the built ones only)."""
        try:
            return super().resolve_command(ctx, args)
        except UsageError as e:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches and "Did you mean" not in e.message:
                e.message = f"{e.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise

    def _build(self, name: str, lazy: Lazy) -> Command:
        target = getattr(importlib.import_module(lazy.module), lazy.attr)
        if isinstance(target, typer.Typer):
            return get_group_from_info(
                TyperInfo(target, name=name, short_help=lazy.short_help),
                pretty_exceptions_short=self.short_exceptions,
                rich_markup_mode=self.rich_markup,
                suggest_commands=True,
            )
        return get_command_from_info(
            CommandInfo(name=name, callback=target, short_help=lazy.short_help),
            pretty_exceptions_short=self.short_exceptions,
            rich_markup_mode=self.rich_markup,
        )

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        """The command list, without importing a command's module for its line."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)  # as click's own list
        rows = []
        for name in names:
            if name in self.table:
                rows.append((name, self.table[name].short_help))
            elif not self.commands[name].hidden:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
