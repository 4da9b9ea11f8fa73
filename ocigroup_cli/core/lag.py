"""Lag as OCI lets it be measured: the service exposes no end offset, so message lag is counted by reading
forward from the committed offset, up to a cap; a count that reaches the cap is a lower bound (shown `≥N`)."""

from __future__ import annotations

DEFAULT_LAG_CAP = 1000  # messages counted per partition before the count becomes "at least"
