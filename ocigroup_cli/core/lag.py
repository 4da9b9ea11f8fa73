"""Lag as OCI lets it be measured: the service exposes no end offset, so message lag is counted by reading
forward from the committed offset, up to a cap. A count that reaches the cap is a lower bound; the partition's
newest offset, when found, gives an upper bound (offsets only grow, and may skip)."""

from __future__ import annotations

DEFAULT_LAG_CAP = 1000  # messages counted per partition before the count becomes "at least"


def lag_text(counted: int, capped: bool, at_most: int | None) -> str:
    """`37` when exact, `1,000–4,000` when capped with a known upper bound, `≥1,000` when capped without one."""
    if not capped:
        return f"{counted:,}"
    if at_most is None:
        return f"≥{counted:,}"
    return f"{counted:,}" if at_most <= counted else f"{counted:,}–{at_most:,}"


def upper(counted: int, capped: bool, at_most: int | None) -> int:
    """The figure to compare with a threshold: the upper bound when there is one, else what was counted."""
    return at_most if capped and at_most is not None else counted
