"""Tests of ocigroup_cli/emulator/monitoring/."""
