"""Reliability proof for `ocigroup tail`: a recorded history, a checker over it, and process fault scenarios.

`python -m reliability.run [--scale ci|full] [--scenario NAME]` runs the scenarios and prints their figures.
"""

from ocigroup_cli.core.clock import SystemClock

REAL = SystemClock()  # the harness measures and paces in real time, whatever clock the code under test gets
