"""Building the package says nothing: `make demo` and `make test` install it first, and a deprecation banner of the
build backend (setuptools' "project.license as a TOML table is deprecated", say) would greet every user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_build_prints_no_warning_banner(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
                          capture_output=True, timeout=300)  # fmt: skip
    said = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, said
    assert "Warning" not in said and "deprecated" not in said.lower(), said[-2000:]
    assert list(tmp_path.glob("ocigroup-*.whl"))
