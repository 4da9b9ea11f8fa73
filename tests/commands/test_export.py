"""`ocigroup export` and `export verify` end to end: the real CLI, one shared local Spark session, the emulator."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ocigroup_cli.errors import ExitCode
from tests.helpers.digest import reference, reference_v1

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _real_time(clock):
    """Spark's tasks read in real time, and the service's rates count real seconds: let the test clock run (the
    tests still move it to build history)."""
    clock.run(True)


@pytest.fixture
def exporting(cli, spark, sdk):
    cli.spark = spark
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test").data[0].id
    sdk.put(sid, [(f"k{i % 5}" if i % 3 else None, f"value-{i}") for i in range(400)])
    sdk.put(sid, [(b"", b"")])  # an empty key is not a missing key
    return cli, sdk, sid


def _export(cli, out, *args):
    return cli("-o", "json", "export", "--out", str(out), *args)


def _truth(sdk, sid, partitions):
    rows = {}
    for p in partitions:
        got, _ = sdk.get(sid, sdk.cursor(sid, p, "TRIM_HORIZON"), limit=10_000)
        rows[p] = [m.offset for m in got]
    return rows


def test_a_multi_partition_export_is_exact_verifiable_and_named_stably(exporting, tmp_path):
    cli, sdk, sid = exporting
    out = tmp_path / "audit"
    r = _export(cli, out, "--partition", "0,2-3", "--from-offset", "0", "--to-offset", "1000000", "--split", "2")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc == json.loads((out / "manifest.json").read_text())
    truth = _truth(sdk, sid, [0, 2, 3])
    for entry in doc["partitions"]:
        offsets = truth[entry["partition"]]
        assert entry["rows"] == len(offsets) and entry["first_offset"] == offsets[0]
        assert entry["last_offset"] == offsets[-1]
        assert entry["gaps"] == offsets[-1] - offsets[0] + 1 - len(offsets) > 0  # the emulator leaves gaps
    assert doc["rows"] == sum(map(len, truth.values()))
    names = sorted(p.name for p in out.iterdir())
    assert names == ["manifest.json", *sorted(f["name"] for f in doc["files"])]
    assert all(n.startswith("partition-000") and n.endswith(".parquet") for n in names[1:])
    assert not list(tmp_path.glob("audit.partial-*"))
    assert doc["profile"] == "test" and doc["spark"]["version"].startswith("4.") and doc["tool"]["name"] == "ocigroup"
    assert "BEGIN" not in r.out and "key_file" not in r.out  # the profile's name only: no key material or paths

    import pyarrow.parquet as pq

    table = pq.read_table(out / doc["files"][0]["name"])
    assert str(table.schema.field("timestamp").type) == "timestamp[us, tz=UTC]"
    assert str(table.schema.field("value").type) == "binary"
    assert cli("export", "verify", str(out)).code == 0


def test_the_same_range_gives_the_same_content_digest_in_every_format(exporting, tmp_path):
    cli, _, _ = exporting
    digests = set()
    for fmt in ("parquet", "jsonl", "csv"):
        r = _export(cli, tmp_path / fmt, "--partition", "1", "--from-offset", "0", "--format", fmt)
        assert r.code == 0, r.err
        digests.add(json.loads(r.out)["content_digest"]["value"])
        check = cli("-o", "json", "export", "verify", str(tmp_path / fmt))
        assert check.code == 0 and json.loads(check.out)["ok"], check.out
    assert len(digests) == 1


def _service_rows(sdk, sid, partitions):
    """Every message of `partitions` as the service holds it: (partition, offset, key, value), in order."""
    rows = []
    for p in partitions:
        got, _ = sdk.get(sid, sdk.cursor(sid, p, "TRIM_HORIZON"), limit=10_000)
        rows += [
            (p, m.offset, None if m.key is None else base64.b64decode(m.key), base64.b64decode(m.value)) for m in got
        ]
    return rows


def test_the_content_digest_is_the_defined_one_whatever_the_split(exporting, tmp_path):
    cli, sdk, sid = exporting
    rows = _service_rows(sdk, sid, [0, 1, 3])
    last = str(max(offset for _, offset, _, _ in rows))
    for split in ("1", "3"):
        out = tmp_path / f"split-{split}"
        r = _export(cli, out, "--partition", "0-1,3", "--from-offset", "0", "--to-offset", last, "--split", split)
        assert r.code == 0, r.err
        doc = json.loads(r.out)
        assert (doc["manifest_version"], doc["content_digest"]["value"]) == (2, reference(rows))
        files = [f["partition"] for f in doc["files"]]
        assert files == [0, 1, 3] if split == "1" else max(files.count(p) for p in (0, 1, 3)) == 3
        assert cli("export", "verify", str(out)).code == 0


def test_verify_knows_version_1_manifests_and_refuses_unknown_versions_in_one_line(exporting, tmp_path):
    cli, sdk, sid = exporting
    out = tmp_path / "old"
    assert _export(cli, out, "--partition", "2-3", "--from-offset", "0", "--split", "2").code == 0
    path = out / "manifest.json"
    doc = json.loads(path.read_text())
    doc["manifest_version"] = 1
    doc["content_digest"]["value"] = reference_v1(_service_rows(sdk, sid, [2, 3]))
    path.write_text(json.dumps(doc))
    assert cli("export", "verify", str(out)).code == 0
    doc["content_digest"]["value"] = reference(_service_rows(sdk, sid, [2, 3]))  # version 2's, under version 1
    path.write_text(json.dumps(doc))
    assert cli("export", "verify", str(out)).code == 1
    doc["manifest_version"] = 3
    path.write_text(json.dumps(doc))
    r = cli("export", "verify", str(out))
    assert r.code == ExitCode.USAGE and "manifest version 3" in r.err and len(r.err.strip().splitlines()) <= 2


def test_a_time_range_exports_what_was_published_between_the_two_times(cli, spark, sdk, clock, tmp_path):
    cli.spark = spark
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test").data[0].id
    stamps = []
    for minute in range(4):
        put = sdk.put(sid, [(f"key-{p}", f"minute-{minute}-{p}") for p in range(20)])
        stamps.append(int(put.entries[0].timestamp.timestamp() * 1000))  # one PutMessages, one timestamp
        clock.advance_ms(60_000)
    window = ["--from-time", str(stamps[1]), "--to-time", str(stamps[2])]  # epoch ms: minutes 1 and 2
    r = _export(cli, tmp_path / "window", "--partition", "0-3", *window, "--format", "jsonl")
    assert r.code == 0, r.err
    lines = [
        json.loads(line) for f in sorted((tmp_path / "window").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    import base64

    minutes = {base64.b64decode(row["value"]).decode().split("-")[1] for row in lines}
    assert minutes == {"1", "2"} and len(lines) == 40


def test_verify_names_a_flipped_byte_a_missing_file_and_an_extra_file(exporting, tmp_path):
    cli, _, _ = exporting
    out = tmp_path / "x"
    assert _export(cli, out, "--partition", "0-1", "--from-offset", "0", "--format", "csv").code == 0
    first, second = sorted(out.glob("*.csv"))
    data = bytearray(first.read_bytes())
    data[-5] ^= 0x01  # one bit of one value
    first.write_bytes(bytes(data))
    second.unlink()
    (out / "notes.txt").write_text("extra")
    r = cli("-o", "json", "export", "verify", str(out))
    assert r.code == ExitCode.FAILURE
    problems = json.loads(r.out)["problems"]
    assert f"missing file: {second.name}" in problems and "extra file: notes.txt" in problems
    assert any(p.startswith(f"{first.name} sha256") for p in problems)
    assert any(p.startswith("content digest") for p in problems)
    assert "difference(s) from its manifest" in r.err and "Traceback" not in r.err
    gone = [p for p in problems if p.startswith("partition ") and "first_offset" in p]  # the deleted file's
    assert gone and gone[0].endswith("the files show nothing (no readable rows)") and "None" not in " ".join(problems)


def test_a_flipped_byte_in_parquet_is_caught_too(exporting, tmp_path):
    cli, _, _ = exporting
    out = tmp_path / "p"
    assert _export(cli, out, "--partition", "2", "--from-offset", "0").code == 0
    (f,) = out.glob("*.parquet")
    data = bytearray(f.read_bytes())
    data[len(data) // 3] ^= 0xFF
    f.write_bytes(bytes(data))
    r = cli("-o", "json", "export", "verify", str(out))
    assert r.code == ExitCode.FAILURE and "Traceback" not in r.err
    assert any(p.startswith(f"{f.name} sha256") for p in json.loads(r.out)["problems"])


def test_a_start_before_retention_is_refused_naming_the_first_available_offset(cli, sdk, clock, tmp_path):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test").data[0].id
    sdk.put(sid, [("same-key", f"old-{i}") for i in range(5)])
    clock.advance_ms(24 * 3_600_000 - 1_000)
    entries = sdk.put(sid, [("same-key", "new")]).entries
    clock.advance_ms(2_000)  # the old ones leave retention
    r = cli("export", "--out", str(tmp_path / "t"), "--partition", str(entries[0].partition), "--from-offset", "0")
    assert r.code == ExitCode.USAGE and "Traceback" not in r.err
    assert f"the first available offset is {entries[0].offset} (" in r.err and "--allow-truncated" in r.err
    assert not (tmp_path / "t").exists()


def test_a_failed_task_leaves_no_partial_directory_and_one_clear_line(exporting, tmp_path):
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.config import resolve
    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.errors import OcigroupError
    from ocigroup_cli.export import job
    from ocigroup_cli.export.resolve import Request, make_plan
    from ocigroup_cli.ops.target import resolve_stream

    cli, sdk, sid = exporting
    profile = resolve(cli.config)
    client = StreamingClient(profile, SystemClock())
    plan = make_plan(client, resolve_stream(client, profile), Request([0, 1], 0, 10**6), SystemClock().time_ms())
    client.close()
    sdk.admin.delete_stream(sid)  # the readers will find it gone
    out = tmp_path / "gone"
    with pytest.raises(OcigroupError, match="404") as failed:
        write = lambda partial: job.write_slices(cli.spark, plan.to_json(), "parquet", str(partial))  # noqa: E731
        job.run(write, plan, job.Target(out, "parquet", "local[2]"), {}, SystemClock())
    assert "EXPORT-ERROR" not in failed.value.message and "Traceback" not in failed.value.message
    assert not out.exists() and not list(tmp_path.glob("gone.partial-*"))


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--partition", "9", "--from-offset", "0"], ExitCode.USAGE, "partition 9 does not exist"),
        (["--partition", "0", "--from-offset", "5", "--to-offset", "2"], ExitCode.USAGE, "before --from-offset"),
        (["--partition", "0"], ExitCode.USAGE, "give an offset range"),
        (["--partition", "0", "--from-offset", "0", "--from-time", "1h"], ExitCode.USAGE, "not both"),
        (["--partition", "0", "--from-time", "yesterday-ish"], ExitCode.USAGE, "--from-time"),
        (["--partition", "0", "--from-offset", "0", "--master", "lokal[2]"], ExitCode.USAGE, "not a Spark master"),
        (["--partition", "0", "--from-offset", "0", "--master", "local[two]"], ExitCode.USAGE, "not a Spark master"),
        (["--partition", "0", "--from-offset", "0", "--master", "local[0]"], ExitCode.USAGE, "not a Spark master"),
        (
            ["--partition", "0", "--from-offset", "0", "--format", "xml"],
            ExitCode.USAGE,
            "must be one of parquet, jsonl, csv",
        ),
        (["--partition", "0", "--from-offset", "0", "--split", "0"], ExitCode.USAGE, "--split must be at least 1"),
    ],
)
def test_bad_requests_get_one_line_and_a_usage_exit(cli, tmp_path, args, code, says):
    r = cli("export", "--out", str(tmp_path / "never"), *args)
    assert r.code == code, r.err
    assert says in r.err and "Traceback" not in r.err and r.out == ""
    assert not (tmp_path / "never").exists()


def test_an_existing_directory_is_never_overwritten(cli, tmp_path):
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "precious").write_text("x")
    r = cli("export", "--out", str(tmp_path / "keep"), "--partition", "0", "--from-offset", "0")
    assert r.code == ExitCode.USAGE and "never overwrites" in r.err
    assert (tmp_path / "keep" / "precious").read_text() == "x"


def test_an_out_that_is_a_symbolic_link_dangling_or_not_is_refused_before_any_work(cli, tmp_path):
    (tmp_path / "real").mkdir()
    for name, to in (("dangling", tmp_path / "nowhere"), ("linked", tmp_path / "real")):
        (tmp_path / name).symlink_to(to)
        r = cli("export", "--out", str(tmp_path / name), "--partition", "0", "--from-offset", "0")
        assert r.code == ExitCode.USAGE and "is a symbolic link" in r.err, r.err
    assert not (tmp_path / "nowhere").exists() and not any((tmp_path / "real").iterdir())


def test_verify_reports_a_data_file_that_is_a_link_to_a_file_outside_the_export(exporting, tmp_path):
    cli, _, _ = exporting
    out = tmp_path / "x"
    assert _export(cli, out, "--partition", "0", "--from-offset", "0", "--format", "csv").code == 0
    (first,) = sorted(out.glob("*.csv"))
    outside = tmp_path / "outside.csv"
    first.rename(outside)
    first.symlink_to(outside)  # the same bytes: only where they are is wrong
    r = cli("-o", "json", "export", "verify", str(out))
    assert r.code == ExitCode.FAILURE
    assert f"{first.name}: a symbolic link, not a file of the export" in json.loads(r.out)["problems"]


def test_missing_java_is_one_clear_line(monkeypatch, tmp_path):
    from ocigroup_cli.errors import UsageError
    from ocigroup_cli.export import spark

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="Java 17 or newer is required"):
        spark.start("local[1]", Path(tmp_path / "log"))


@pytest.mark.slow
@pytest.mark.timeout(900)  # two cold JVMs and the archive's writing: over 5 minutes beside another suite, 2 cores
def test_the_first_export_records_the_class_archive_and_later_exports_map_it(cli, sdk, tmp_path):
    """Real `ocigroup` processes, each with its own JVM: stdout stays pure JSON while the JVM records."""
    import os
    import subprocess
    import sys

    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test").data[0].id
    sdk.put(sid, [(None, f"value-{i}") for i in range(50)])
    cache = Path(os.environ["OCIGROUP_STATE_DIR"]) / "cache"
    digests = []
    for run_number in range(2):
        out = tmp_path / f"run-{run_number}"
        args = ["--config", cli.config, "-o", "json", "export", "--partition", "0-3", "--from-offset", "0"]
        proc = subprocess.run(
            [sys.executable, "-m", "ocigroup_cli", *args, "--out", str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "OCIGROUP_EXPORT_ENGINE": "cold"},  # the archive is the cold JVM's
        )
        assert proc.returncode == 0, proc.stderr
        digests.append(json.loads(proc.stdout)["content_digest"]["value"])  # nothing but the manifest
        archives = sorted(p.name for p in cache.iterdir())
        assert len(archives) == 1 and archives[0].startswith("spark-") and archives[0].endswith(".jsa"), archives
        assert ("first export only" in proc.stderr) == (run_number == 0)
    assert digests[0] == digests[1]


def test_a_range_ending_in_the_future_is_refused_or_exported_up_to_now_and_verified_as_truncated(exporting, tmp_path):
    from ocigroup_cli.core.timefmt import ms_to_rfc3339

    cli, _, _ = exporting
    import time

    tomorrow = ms_to_rfc3339(int(time.time() * 1000) + 86_400_000)
    args = ["--partition", "0-1", "--from-time", "1h", "--to-time", tomorrow]
    refused = _export(cli, tmp_path / "early", *args)
    assert refused.code == ExitCode.USAGE and "in the future" in refused.err and "--allow-future" in refused.err
    assert not (tmp_path / "early").exists()
    r = _export(cli, tmp_path / "upto", *args, "--allow-future")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["truncated_at_present"] == {"asked_to": tomorrow, "stopped_at": doc["fixed_end"]}
    assert "the export stopped at the present" in r.err
    check = cli("-o", "table", "export", "verify", str(tmp_path / "upto"))
    assert check.code == ExitCode.FAILURE and "the export is truncated" in check.err
    assert f"truncated: it ends at {doc['fixed_end']}, when it ran, not at the --to-time {tomorrow}" in check.out
    accepted = cli("-o", "table", "export", "verify", str(tmp_path / "upto"), "--allow-truncated")
    assert accepted.code == 0 and "truncated, accepted with --allow-truncated" in accepted.out


def test_an_export_whose_start_had_left_retention_verifies_as_truncated(cli, spark, sdk, clock, tmp_path):
    cli.spark = spark
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test").data[0].id
    sdk.put(sid, [("same-key", f"old-{i}") for i in range(5)])
    clock.advance_ms(24 * 3_600_000 - 1_000)
    entries = sdk.put(sid, [("same-key", "new")]).entries
    clock.advance_ms(2_000)
    p = str(entries[0].partition)
    out = tmp_path / "rest"
    assert _export(cli, out, "--partition", p, "--from-offset", "0", "--allow-truncated").code == 0
    check = cli("-o", "json", "export", "verify", str(out))
    assert check.code == ExitCode.FAILURE, check.err
    doc = json.loads(check.out)
    assert doc["ok"] is False and doc["problems"] == []
    assert doc["truncated"] == [f"partition {p} starts at offset {entries[0].offset}, not at the offset 0 asked: "
                                "the messages before had left retention"]  # fmt: skip
