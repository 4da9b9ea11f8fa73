"""ocigroup: operate OCI Streaming consumer groups from the command line."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # computed on first use: reading package metadata costs ~20 ms, too much for every start
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("ocigroup")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0.0.0+unknown"
    raise AttributeError(name)
