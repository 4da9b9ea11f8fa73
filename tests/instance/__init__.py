"""Tests of ocigroup_cli/instance/."""
