"""`python -m ocigroup_cli.docgen [--check] [--root DIR]`: write the generated docs, or check them for drift."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ocigroup_cli.docgen import drifted, render, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ocigroup_cli.docgen", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (default: .)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the files that drifted")
    args = parser.parse_args(argv)
    files = render()
    if args.check:
        stale = drifted(args.root, files)
        for rel in stale:
            sys.stderr.write(f"{rel} is out of date; run: python -m ocigroup_cli.docgen\n")
        return 1 if stale else 0
    for rel in write(args.root, files):
        sys.stdout.write(f"wrote {rel}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
