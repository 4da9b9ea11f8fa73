"""`python -m ocigroup_cli` runs the same entry point as the `ocigroup` script."""

from __future__ import annotations

from ocigroup_cli.app import main

if __name__ == "__main__":
    main()
