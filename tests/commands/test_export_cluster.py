"""Export on a real Spark standalone cluster: a master and a worker on loopback, the CLI as the driver in client
mode (`--master spark://…`), and docs/export.md's `spark-submit` recipe run as written. Three JVMs start, so it runs
with the full-scale tests only (OCIGROUP_FULL_SCALE=1), not in CI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.localhost import free_port
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("OCIGROUP_FULL_SCALE") != "1", reason="three JVMs: OCIGROUP_FULL_SCALE=1 runs it"
    ),
]

EXPORT_JOB = "import sys\nfrom ocigroup_cli.app import run\nsys.exit(run(sys.argv[1:]))\n"


def _spark_home() -> Path:
    import pyspark

    return Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)


def _wait_listening(port: int, what: str, log: Path, timeout: float = 90) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.25)
    raise AssertionError(f"the {what} did not start: {log.read_text()[-2000:]}")


@pytest.fixture
def cluster(tmp_path):
    """`spark://127.0.0.1:PORT`: a standalone master and one worker with two cores, both on loopback."""
    home = _spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    (tmp_path / "worker-tmp").mkdir()
    worker_env = {**env, "TMPDIR": str(tmp_path / "worker-tmp")}  # the worker's files are its own
    port, ui = free_port(), free_port()
    klass = str(home / "bin" / "spark-class")
    started = []
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    try:
        master_log = logs / "master.log"
        args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]
        started.append(_spawn([klass, "org.apache.spark.deploy.master.Master", *args], env, master_log))
        _wait_listening(port, "master", master_log)
        url = f"spark://127.0.0.1:{port}"
        work = tmp_path / "work"
        args = ["--host", "127.0.0.1", "--cores", "2", "--memory", "1g", "--webui-port", str(free_port())]
        worker_log = logs / "worker.log"
        started.append(
            _spawn(
                [klass, "org.apache.spark.deploy.worker.Worker", *args, "--work-dir", str(work), url],
                worker_env,
                worker_log,
            )
        )
        deadline = time.monotonic() + 90
        while "Successfully registered with master" not in worker_log.read_text() and time.monotonic() < deadline:
            time.sleep(0.25)
        yield url
    finally:
        for p in reversed(started):
            p.terminate()
            p.wait(30)


def _spawn(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_a_standalone_cluster_and_the_readme_recipe_give_the_local_digest(cluster, api_key, spark_engine, tmp_path):
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=4, name="orders")
        for _ in range(4):
            sdk.put(sid, [(f"k{i}", os.urandom(300)) for i in range(250)])
        config = write_config(tmp_path, api_key, sdk.url)
        env = proc.clean_env(tmp_path / "state", PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        export = [
            "--config",
            config,
            "-o",
            "json",
            "export",
            "--partition",
            "0-3",
            "--from-offset",
            "0",
            "--split",
            "2",
        ]

        engine = proc.sc_master(spark_engine)  # the local digest
        local = proc.run([*export, "--out", str(tmp_path / "local"), "--master", engine], env, timeout=300)
        on_cluster = proc.run([*export, "--out", str(tmp_path / "cluster"), "--master", cluster], env, timeout=300)
        assert local.returncode == 0, local.stderr.decode()
        assert on_cluster.returncode == 0, on_cluster.stderr.decode()
        digest = json.loads(local.stdout)["content_digest"]["value"]
        doc = json.loads(on_cluster.stdout)
        assert doc["rows"] == 1000 and doc["content_digest"]["value"] == digest
        assert doc["spark"]["master"] == cluster

        # docs/export.md's recipe: the package as a zip, the CLI's entry point as the job, spark-submit as the driver
        # (spark-submit merges the job's stderr into its stdout: -q keeps notices out of the JSON)
        package = Path(__import__("ocigroup_cli").__file__).parent
        archive = tmp_path / "ocigroup_cli.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for path in package.rglob("*.py"):
                zf.write(path, path.relative_to(package.parent))
        (tmp_path / "export_job.py").write_text(EXPORT_JOB)
        submit = [str(_spark_home() / "bin" / "spark-submit"), "--master", cluster, "--py-files", str(archive)]
        recipe = subprocess.run(
            [*submit, str(tmp_path / "export_job.py"), "-q", *export, "--out", str(tmp_path / "recipe")],
            env=env,
            capture_output=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert recipe.returncode == 0, (recipe.stdout + recipe.stderr).decode()[-3000:]
        assert json.loads(recipe.stdout)["content_digest"]["value"] == digest
    finally:
        server.stop()


def test_a_standalone_cluster_exports_to_object_storage_without_a_shared_disk(cluster, api_key, spark_engine, tmp_path):
    """The worker writes its slices to Object Storage itself: its working and temporary directories are its own
    (TMPDIR under its work dir), the driver's `--out` is a bucket, and nothing passes through a shared path."""
    import oci

    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=4, name="orders")
        for _ in range(4):
            sdk.put(sid, [(f"k{i}", os.urandom(300)) for i in range(250)])
        storage = oci.object_storage.ObjectStorageClient(api_key.config(), service_endpoint=sdk.url)
        ns = storage.get_namespace().data
        details = oci.object_storage.models.CreateBucketDetails(name="audit", compartment_id="ocid1.compartment.oc1..t")
        storage.create_bucket(ns, details)
        config = write_config(tmp_path, api_key, sdk.url)
        env = proc.clean_env(tmp_path / "state", PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        export = ["--config", config, "-o", "json", "export", "--partition", "0-3", "--from-offset", "0"]
        engine = proc.sc_master(spark_engine)
        local = proc.run([*export, "--out", str(tmp_path / "local"), "--master", engine], env, timeout=300)
        stored = proc.run([*export, "--out", f"oci://audit@{ns}/cluster", "--master", cluster], env, timeout=300)
        assert local.returncode == 0 and stored.returncode == 0, (local.stderr + stored.stderr).decode()
        doc = json.loads(stored.stdout)
        assert doc["content_digest"] == json.loads(local.stdout)["content_digest"] and doc["spark"]["master"] == cluster
        verified = proc.run(["--config", config, "export", "verify", f"oci://audit@{ns}/cluster"], env)
        assert verified.returncode == 0, verified.stderr.decode()
        assert not list(tmp_path.glob("cluster.*")) and not (tmp_path / "cluster").exists()  # nothing beside the driver
    finally:
        server.stop()
