"""Tests of ocigroup_cli/emulator/objectstorage/."""
