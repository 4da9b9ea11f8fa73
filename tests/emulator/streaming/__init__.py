"""Tests of ocigroup_cli/emulator/streaming/."""
