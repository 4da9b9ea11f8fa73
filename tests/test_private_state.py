"""The state directory is its owner's: made 0700, every file in it 0600 from the start (the emulator's data holds
message values, the local key is a key, the crash log records command lines), and the crash log keeps the command
and its options' names, never the values given (a `publish` payload, an --exec command, a key)."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from ocigroup_cli.app import said_argv
from ocigroup_cli.localhost import free_port
from tests.helpers import cli as proc

pytestmark = pytest.mark.timeout(120)


def test_a_fresh_state_directory_and_everything_in_it_are_private(tmp_path):
    state = tmp_path / "deep" / "state"
    env = proc.clean_env(state, OCIGROUP_LOCAL_PORT=str(free_port()))
    try:
        done = proc.run(["--profile", "local", "publish", "a secret value"], env)
        assert done.returncode == 0, done.stderr.decode()
        for args in (["tail", "audit", "--create", "-n", "1"], ["inspect", "audit"]):  # their hints and caches
            done = proc.run(["--profile", "local", *args], env)
            assert done.returncode == 0, done.stderr.decode()
    finally:
        subprocess.run([proc.exe(), "--profile", "local", "emulator", "stop"], env=env, capture_output=True, timeout=60)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    umask = os.umask(0)
    os.umask(umask)  # only what is ocigroup's own is made 0700; above it, the user's umask rules
    assert stat.S_IMODE((tmp_path / "deep").stat().st_mode) == 0o755 & ~umask  # never writable by others
    found = list(state.rglob("*"))
    kept = {"emulator.db", "emulator.log", "streams.json", "key.pem", "key_public.pem", "groups.json", "newest.json"}
    assert kept <= {p.name for p in found}, sorted(p.name for p in found)
    loose = [f"{p.relative_to(state)} {oct(stat.S_IMODE(p.stat().st_mode))}" for p in found
             if stat.S_IMODE(p.stat().st_mode) & 0o077]  # fmt: skip
    assert not loose


def test_the_crash_log_keeps_the_command_and_option_names_not_the_values():
    argv = ["--profile", "prod", "publish", "card 4111-1111", "--key=customer-42", "tail", "--exec", "rm -rf /x",
            "streams", "show", "orders", "-q"]  # fmt: skip
    assert said_argv(argv) == ["--profile", "…", "publish", "…", "--key=…", "tail", "--exec", "…", "streams",
                               "show", "…", "-q"]  # fmt: skip


def test_a_state_directory_others_can_write_or_that_another_user_made_is_not_used(tmp_path):
    """`OCIGROUP_STATE_DIR=/tmp/ocigroup` in a cron line, made beforehand by another local user (mode 0777, a link
    `emulator.log` to a file of the victim's planted in it): refused in one line, nothing started or written."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    victim = tmp_path / "victim-file"
    victim.write_text("the victim's\n")
    (shared / "emulator.log").symlink_to(victim)
    env = proc.clean_env(shared, OCIGROUP_LOCAL_PORT=str(free_port()))
    for args in (["emulator", "start"], ["--profile", "local", "publish", "x"], ["groups", "list"]):
        r = proc.run(args, env)
        err = r.stderr.decode()
        assert r.returncode == 2 and f"state directory {shared} can be written by others (mode 777)" in err, err
    assert victim.read_text() == "the victim's\n" and sorted(p.name for p in shared.iterdir()) == ["emulator.log"]
    shared.chmod(0o700)
    assert proc.run(["profile", "show"], env).returncode == 0  # its owner's alone: used
    if os.geteuid() == 0:  # only root can give a directory to another user
        os.chown(shared, 1002, 1002)
        theirs = proc.run(["profile", "show"], env)
        assert theirs.returncode == 2 and b"belongs to another user (uid 1002)" in theirs.stderr
        os.chown(shared, 0, 0)
        link = tmp_path / "link"
        link.symlink_to(shared)
        os.lchown(link, 1002, 1002)  # a link of theirs to a directory of mine: they can point it elsewhere later
        linked = proc.run(["profile", "show"], proc.clean_env(link))
        assert linked.returncode == 2 and b"is a link that belongs to another user (uid 1002)" in linked.stderr
    open_parent = tmp_path / "open"  # a folder anyone can write (not sticky): my 0700 state dir can be swapped
    (open_parent / "state").mkdir(parents=True, mode=0o700)
    open_parent.chmod(0o777)
    swapped = proc.run(["profile", "show"], proc.clean_env(open_parent / "state"))
    assert swapped.returncode == 2 and f"lies in {open_parent}, which anyone can write".encode() in swapped.stderr


def test_a_profile_file_another_user_owns_or_anyone_can_write_is_not_used(tmp_path):
    """It chooses the endpoint and the key: another user's file (or one anyone can write) pointed root's commands
    at their server, signing with root's key. Group-writable stays usable (umask 002 makes files so)."""
    config = tmp_path / "config.yaml"
    config.write_text("profiles:\n  p:\n    endpoint: http://127.0.0.1:9\n")
    env = proc.clean_env(tmp_path / "state")
    config.chmod(0o666)
    r = proc.run(["--config", str(config), "-p", "p", "profile", "show"], env)
    assert r.returncode == 2 and b"can be written by anyone (mode 666): it is not used" in r.stderr, r.stderr
    config.chmod(0o664)
    assert proc.run(["--config", str(config), "-p", "p", "profile", "show"], env).returncode == 0
    if os.geteuid() == 0:  # only root can give a file to another user
        os.chown(config, 1002, 1002)
        r = proc.run(["--config", str(config), "-p", "p", "profile", "show"], env)
        assert r.returncode == 2 and b"belongs to another user (uid 1002), who could point its" in r.stderr


def test_what_decides_on_a_profile_file_is_the_file_opened_not_the_path_looked_at(tmp_path):
    """The owner was checked on the path, then the path was opened again: a link swapped in between (another
    user's) was read. `trust` now sees the status of the descriptor that is read."""
    from ocigroup_cli import inputs
    from ocigroup_cli.errors import ConfigError

    mine = tmp_path / "mine.yaml"
    mine.write_text("profiles: {}\n")
    seen = []

    def trust(st):
        seen.append(st.st_ino)
        raise ConfigError("not trusted")

    with pytest.raises(ConfigError, match="not trusted"):
        inputs.read_bytes(mine, 1 << 20, "profile file", trust)
    assert seen == [mine.stat().st_ino]
