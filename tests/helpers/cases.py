"""What property and state-machine tests ran: title -> {what: count}, printed at the end of the run."""

from __future__ import annotations

from collections import Counter, defaultdict

HYPOTHESIS_CASES: dict[str, Counter[str]] = defaultdict(Counter)
