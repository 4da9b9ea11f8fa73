"""Files the tool reads, named by a careless user or an attacker: /dev/zero, a FIFO, a directory, a huge file, as
the profile, the key, a reset plan or a state file. Through the installed console script, under a 1 GB address-space
limit: one line naming the file and what it is, exit 2, at once (nothing read to the end of /dev/zero, no FIFO
waited on)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import cli as proc
from tests.helpers.service import write_config

pytestmark = pytest.mark.timeout(60)


def _run(args: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    """The command with 1 GiB of address space at most (the shell sets the limit: a preexec_fn would fork this
    worker, whose gRPC threads, when it holds a Spark session, may abort the child)."""
    t = time.monotonic()
    limited = ["sh", "-c", 'ulimit -v 1048576 && exec "$@"', "sh", proc.exe(), *args]
    done = subprocess.run(limited, env=env, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr.decode(errors="replace"), time.monotonic() - t


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_profile_file_that_is_not_a_regular_file_or_too_large_is_refused(tmp_path, fifo):
    env = proc.clean_env(tmp_path / "state")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    cases = [
        ("/dev/zero", "profile file /dev/zero: a character device, not a regular file."),
        (str(fifo), f"profile file {fifo}: a FIFO, not a regular file."),
        (str(tmp_path), f"profile file {tmp_path}: a directory, not a regular file."),
        (str(big), f"profile file {big}: larger than 1,048,576 bytes"),
    ]
    for path, said in cases:
        code, err, seconds = _run(["--config", path, "profile", "show"], env)
        assert code == 2, (path, err)
        assert err.startswith(f"error: {said}"), (path, err)
        assert seconds < 10 and "Traceback" not in err


def test_a_key_file_that_is_dev_zero_or_a_fifo_is_refused(api_key, tmp_path, fifo):
    env = proc.clean_env(tmp_path / "state")
    for key in ("/dev/zero", str(fifo)):
        config = write_config(tmp_path, api_key, "http://127.0.0.1:9")
        doc = yaml.safe_load(Path(config).read_text())
        doc["profiles"]["test"]["auth"]["key_file"] = key
        (tmp_path / "ocigroup.yaml").write_text(yaml.safe_dump(doc))
        code, err, seconds = _run(["--config", config, "streams", "list"], env)
        assert code == 2 and err.startswith(f"error: auth.key_file {key}: a "), err
        assert "not a regular file" in err and seconds < 10


def test_a_reset_plan_that_is_dev_zero_is_refused(api_key, tmp_path):
    config = write_config(tmp_path, api_key, "http://127.0.0.1:9", group__name="billing")
    code, err, _ = _run(["--config", config, "reset", "--from-plan", "/dev/zero"], proc.clean_env(tmp_path / "state"))
    assert code == 2 and "/dev/zero: a character device, not a regular file." in err, err


def test_a_state_file_replaced_by_a_fifo_is_ignored_not_waited_on(api_key, tmp_path):
    """State files are caches: one that is not a regular file costs a lookup, never a hang."""
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "streams.json")
    config = write_config(tmp_path, api_key, "http://127.0.0.1:9", deadline_s=1)
    code, err, seconds = _run(["--config", config, "streams", "show", "orders"], proc.clean_env(state))
    assert code == 4 and seconds < 10, err  # it went on to the (dead) endpoint
