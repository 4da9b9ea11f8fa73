"""A key or value that is not base64 is not the service's answer: a lenient decoder dropped what was not base64, and
tail wrote "!!!" as an empty value and committed it. Now tail stops with exit 4 and nothing of the read written
(plain tail) or run (--exec)."""

from __future__ import annotations

import io

import pytest

from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.core.models import Message
from ocigroup_cli.delivery import StreamDelivery
from ocigroup_cli.errors import BadAnswer, ExitCode
from ocigroup_cli.instance.crew import Crew, ExecOptions
from ocigroup_cli.views.lines import LineSink, formatter

GOOD = Message(0, 1, "2026-01-01T00:00:00.000Z", None, "aGk=")
BAD = Message(0, 2, "2026-01-01T00:00:00.000Z", None, "!!!")


@pytest.mark.parametrize("fmt", ["value", "json", "template"])
def test_plain_tail_writes_nothing_of_a_batch_holding_one(fmt):
    out = io.StringIO()
    sink = LineSink(StreamDelivery(out), formatter(fmt, "utf8", "{value}" if fmt == "template" else None))
    with pytest.raises(BadAnswer) as raised:
        sink.deliver([GOOD, BAD])
    assert raised.value.exit_code == ExitCode.TRANSIENT
    assert "partition 0, offset 2 is not base64" in raised.value.message
    assert out.getvalue() == ""


def test_exec_does_not_run_the_command_for_it():
    crew = Crew(ExecOptions(command="exit 0"), {}, ManualClock(0), lambda _: None, lambda _: None)
    verdict = crew._run((BAD,))
    assert verdict.kind == "bad-answer" and not verdict.settled and verdict.attempts == 0
    assert isinstance(verdict.error, BadAnswer)
