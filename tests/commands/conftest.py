from __future__ import annotations

from dataclasses import dataclass

import pytest

from ocigroup_cli.app import run
from tests.helpers.service import write_config


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(sdk, api_key, tmp_path, capsys, clock):
    """Run `ocigroup --config <profile for the test emulator> ARGS...` in-process; stream `orders` exists."""
    sdk.stream(partitions=4, name="orders")
    config = write_config(tmp_path, api_key, sdk.url, group__name="billing", group__timeout_ms=30000)

    def call(*args: str) -> Result:
        capsys.readouterr()
        code = run(["--config", config, *args], clock=clock, spark=call.spark)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    call.config = config
    call.spark = None  # export tests put the shared session here
    return call
