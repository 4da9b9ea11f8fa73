"""How many messages to ask GetMessages for, so that each answer stays near a size in bytes.

`limit` counts messages, and the service's own batch sizing is not documented, so a reader that only counts
(inspect's lag, a reset plan, the newest-message search) could ask for 10,000 messages of 1 MiB: 13 GB of
base64 in one answer. A Sizer learns the average size of the messages it has seen and asks for as many as fit
in READ_BYTES; before it has seen any, it asks for FIRST_READ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ocigroup_cli.core.limits import MAX_GET_LIMIT
from ocigroup_cli.core.models import Message

READ_BYTES = 8 << 20  # base64 of keys and values per answer
FIRST_READ = 20  # messages in a first answer, before their size is known (20 x 1 MiB at worst)


@dataclass
class Sizer:
    """Shared by the readers of one command (partitions of a stream tend to carry alike messages)."""

    messages: int = 0
    size: int = 0  # their keys and values, base64

    def limit(self, wanted: int) -> int:
        """The `limit` for an answer of at most `wanted` messages."""
        if not self.messages:
            return max(1, min(wanted, FIRST_READ))
        average = max(1, self.size // self.messages)
        return max(1, min(wanted, MAX_GET_LIMIT, READ_BYTES // average))

    def saw(self, page: Iterable[Message]) -> int:
        """Learn from an answer; its size in bytes."""
        size = n = 0
        for m in page:
            size += len(m.value) + len(m.key or "")
            n += 1
        self.messages += n
        self.size += size
        return size
