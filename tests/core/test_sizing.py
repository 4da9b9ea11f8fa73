"""Answer sizing: a first small answer, then as many messages as fit the byte target, never over 10,000."""

from __future__ import annotations

import base64

from ocigroup_cli.core.models import Message
from ocigroup_cli.core.sizing import FIRST_READ, READ_BYTES, Sizer


def _messages(n: int, size: int) -> list[Message]:
    value = base64.b64encode(b"x" * size).decode()
    return [Message(0, i, "2026-11-23T00:00:00.000Z", "azE=", value) for i in range(n)]


def test_the_first_answer_is_small_and_later_ones_fit_the_target():
    sizer = Sizer()
    assert sizer.limit(1000) == FIRST_READ and sizer.limit(3) == 3
    assert sizer.saw(_messages(4, 1024 * 1024 - 1024)) == 4 * (1_396_736 + 4)
    assert sizer.limit(1000) == READ_BYTES // 1_396_740  # 6 messages of 1 MiB - 1 KiB, not 1,000
    small = Sizer()
    small.saw(_messages(20, 200))
    assert small.limit(1000) == 1000 and small.limit(50_000) == 10_000


def test_an_empty_answer_teaches_nothing_and_the_limit_is_never_zero():
    sizer = Sizer()
    assert sizer.saw([]) == 0 and sizer.limit(1000) == FIRST_READ
    sizer.saw(_messages(1, 2 * READ_BYTES))  # one message over the whole byte target: 0 would fit
    assert sizer.limit(1000) == 1
