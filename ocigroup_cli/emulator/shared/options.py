"""The emulator's options, shared by every service it serves: the region, the Object Storage namespace, and
Streaming's offsets, rates and lifecycle timings (`ocigroup emulator serve`'s flags)."""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.emulator.shared.limits import DEFAULT_READ_BUDGET_BYTES

DEFAULT_NAMESPACE = "emulator"  # the tenancy's Object Storage namespace
DEFAULT_TRANSITION_MS = 1000  # how long CREATING and DELETING last: the service takes longer, the point is that
# they exist and the SDK's and the oci CLI's waiters get to wait


@dataclass(frozen=True)
class Options:
    region: str = "us-ashburn-1"
    dense_offsets: bool = False
    rate_limits: bool = True  # the service's: off only for load tests and benchmarks of the tool itself
    read_budget_bytes: int = DEFAULT_READ_BUDGET_BYTES
    transition_ms: int = DEFAULT_TRANSITION_MS  # how long a stream is CREATING (or DELETING)
    uncommitted_as_minus_one: bool = False  # GetGroup's committedOffset for "never committed": -1, as in 2018's traffic
    namespace: str = DEFAULT_NAMESPACE  # the tenancy's Object Storage namespace
