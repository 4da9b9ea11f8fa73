"""Reliability proof for `ocigroup tail`: a recorded history, a checker over it, and process fault scenarios.

`python -m reliability.run [--scale ci|full] [--scenario NAME]` runs the scenarios and prints their figures.
"""
