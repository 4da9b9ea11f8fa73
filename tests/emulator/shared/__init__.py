"""Tests of ocigroup_cli/emulator/shared/."""
