"""The Spark JVM's class archive: its name, stale recordings, and publishing it when a real process exits.

The processes here are real children that behave like the gateway JVM: they write the recording only when
their stdin closes, as the JVM does with `-XX:ArchiveClassesAtExit`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ocigroup_cli.export import classcache

NOW_MS = 1_800_000_000_000
JVM_LIKE = "import sys; sys.stdin.read(); open(sys.argv[1], 'wb').write(b'classes'); sys.exit(int(sys.argv[2]))"


def _jvm(recording: Path, exit_code: int = 0) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", JVM_LIKE, str(recording), str(exit_code)], stdin=subprocess.PIPE)


@pytest.fixture
def java(tmp_path):
    """A `java` binary: the archive's name is keyed on it."""
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "java").write_text("#!/bin/sh\n")
    (bin_dir / "java").chmod(0o755)
    return bin_dir / "java"


def test_the_first_run_records_and_later_runs_map_the_archive(java, tmp_path):
    cache = classcache.for_spark(tmp_path / "cache", tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert cache is not None and cache.recording is not None
    assert cache.archive.name.startswith("spark-4.3.0-") and cache.archive.suffix == ".jsa"
    assert cache.java_options() == f"-XX:ArchiveClassesAtExit={cache.recording}"

    jvm = _jvm(cache.recording)
    cache.finish(jvm)
    assert jvm.returncode == 0 and cache.archive.read_bytes() == b"classes"
    assert [p.name for p in cache.archive.parent.iterdir()] == [cache.archive.name]

    later = classcache.for_spark(tmp_path / "cache", tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert later is not None and later.recording is None
    assert later.java_options() == f"-XX:SharedArchiveFile={cache.archive}"
    later.finish(None)  # nothing to publish when mapping
    assert later.archive.read_bytes() == b"classes"


def test_another_spark_or_java_gets_its_own_archive(java, tmp_path):
    one = classcache.for_spark(tmp_path, tmp_path / "spark", "4.3.0", java, NOW_MS)
    other_spark = classcache.for_spark(tmp_path, tmp_path / "spark", "4.4.0", java, NOW_MS)
    java.write_text("#!/bin/sh\n# another build\n")
    other_java = classcache.for_spark(tmp_path, tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert one and other_spark and other_java
    assert len({one.archive, other_spark.archive, other_java.archive}) == 3


def test_a_jvm_that_fails_leaves_no_archive_and_no_recording(java, tmp_path):
    cache = classcache.for_spark(tmp_path, tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert cache is not None and cache.recording is not None
    cache.finish(_jvm(cache.recording, exit_code=3))
    assert list(tmp_path.glob("*.jsa*")) == []


def test_an_abandoned_recording_is_killed_before_it_writes_anything(java, tmp_path):
    cache = classcache.for_spark(tmp_path, tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert cache is not None and cache.recording is not None
    jvm = _jvm(cache.recording)
    cache.abandon(jvm)
    assert jvm.returncode != 0 and list(tmp_path.glob("*.jsa*")) == []


def test_a_jvm_that_does_not_write_its_archive_in_time_is_stopped_and_leaves_nothing(java, tmp_path):
    cache = classcache.for_spark(tmp_path, tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert cache is not None and cache.recording is not None
    stuck = subprocess.Popen(
        [sys.executable, "-c", f"open({str(cache.recording)!r}, 'wb').write(b'part'); import time; time.sleep(60)"],
        stdin=subprocess.PIPE,
    )
    while not cache.recording.exists():  # it has begun writing
        assert stuck.poll() is None
        time.sleep(0.01)
    cache.finish(stuck, timeout_s=0.5)
    assert stuck.returncode is not None and list(tmp_path.glob("*.jsa*")) == []


def test_an_archive_the_jvm_cannot_use_is_discarded(java, tmp_path):
    (tmp_path / "cache").mkdir()
    first = classcache.for_spark(tmp_path / "cache", tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert first is not None
    first.archive.write_bytes(b"broken")
    mapped = classcache.for_spark(tmp_path / "cache", tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert mapped is not None and mapped.recording is None
    without = mapped.discard()
    assert not mapped.archive.exists() and without.recording is None


def test_only_stale_recordings_are_swept(java, tmp_path):
    stale, fresh = tmp_path / "spark-x.jsa.recording-11", tmp_path / "spark-x.jsa.recording-12"
    for path, age_s in ((stale, classcache.STALE_S + 60), (fresh, 60)):
        path.write_bytes(b"partial")
        os.utime(path, (NOW_MS / 1000 - age_s, NOW_MS / 1000 - age_s))
    classcache.for_spark(tmp_path, tmp_path / "spark", "4.3.0", java, NOW_MS)
    assert not stale.exists() and fresh.exists()


def test_without_java_there_is_no_archive(tmp_path, monkeypatch):
    from ocigroup_cli.export import spark

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert spark.class_cache(NOW_MS) is None
    assert classcache.for_spark(tmp_path, tmp_path / "spark", "4.3.0", tmp_path / "no-java", NOW_MS) is None
