"""A table that keeps what a person reads whole on a narrow terminal: each row becomes a record of its own.

Rich fits a table to the terminal by narrowing its columns, and when the columns that must not fold (numbers,
headers) do not fit it cuts them with "…", or drops a column altogether, without a word. Below its least width (each
column's `min_width`, set by console.table: a number's widest cell, a header, the longest number in a text cell)
this table is drawn instead as records, one per row, a header and its value a line, as `psql`'s expanded display
does: every value whole, folded only where it is text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

PADDING = 2  # between two columns: rich's default padding (0, 1), edges not padded


class FittedTable(Table):
    def least_width(self) -> int:
        return sum(column.min_width or 1 for column in self.columns) + PADDING * (len(self.columns) - 1)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width >= self.least_width():
            yield from super().__rich_console__(console, options)
            return
        if self.title is not None:
            yield self.title
        yield from self._records()

    def _records(self) -> Iterator[Any]:
        label = max(len(str(column.header)) for column in self.columns)
        for index in range(self.row_count):
            record = Table.grid(padding=(0, 1))
            record.add_column(no_wrap=True, style="bold", min_width=label)
            record.add_column(overflow="fold")
            for column in self.columns:
                cell = column._cells[index]  # the cells console.table added: Text
                record.add_row(Text(str(column.header)), cell)
            if index:
                yield Text("")
            yield record
