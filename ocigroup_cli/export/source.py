"""The `ocistreaming` PySpark Python Data Source: one Spark input partition per slice of the plan.

Spark builds the source and its reader in short-lived planner workers and calls `read` in executor workers;
nothing of the CLI process is visible there, so the whole plan travels as one JSON option (`plan`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ocigroup_cli.export.plan import Plan, Slice
from ocigroup_cli.export.reader import SCHEMA_DDL, read_batches

NAME = "ocistreaming"


class SlicePartition(InputPartition):
    def __init__(self, s: Slice) -> None:
        super().__init__(s)
        self.slice = s


class StreamSliceReader(DataSourceReader):
    def __init__(self, plan: Plan, schema: StructType) -> None:
        self.plan = plan
        self.schema = schema

    def partitions(self) -> list[SlicePartition]:
        return [SlicePartition(s) for s in self.plan.slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, SlicePartition)
        yield from read_batches(self.plan, partition.slice, to_arrow_schema(self.schema, timezone="UTC"))


class StreamSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> StreamSliceReader:  # Spark passes `schema=` by keyword
        return StreamSliceReader(Plan.from_json(self.options["plan"]), schema)
