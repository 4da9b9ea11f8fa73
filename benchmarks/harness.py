"""What the benchmarks share: an emulator process with its own key and a profile file pointing at it, and a
sampler of a process tree's memory."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ocigroup_cli.client.auth import fingerprint_of, load_private_key
from ocigroup_cli.client.signing import ApiKeySigner
from ocigroup_cli.client.transport import Transport
from ocigroup_cli.core import owner
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.localhost import free_port
from ocigroup_cli.ops import local

TENANCY, USER = "ocid1.tenancy.oc1..bench", "ocid1.user.oc1..bench"


@dataclass
class BenchEmulator:
    """`ocigroup emulator serve` on a free loopback port, a key it trusts, a profile `bench` for it, and a signed
    transport straight to it (no retries, no client logic: what the emulator's own benchmark measures with).

    Without `limits` the emulator runs with --no-rate-limits and the profile does not pace its requests: what is
    measured is the tool itself. With `limits`, both keep the service's rates."""

    tmp: Path
    extra_args: tuple[str, ...] = ()
    group: str | None = None
    limits: bool = False
    port: int = 0
    key_file: Path = field(init=False)
    fingerprint: str = field(init=False)
    signer: ApiKeySigner = field(init=False)
    config: Path = field(init=False)
    proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BenchEmulator:
        os.environ["OCIGROUP_STATE_DIR"] = str(self.tmp / "state")  # its owner key (core/owner.py) is the run's
        self.key_file = local.write_key_pair(self.tmp)
        key = load_private_key(str(self.key_file), None, "bench key")
        self.fingerprint = fingerprint_of(key)
        self.signer = ApiKeySigner(f"{TENANCY}/{USER}/{self.fingerprint}", key)
        self.port = free_port()
        log = self.tmp / "emulator.log"
        pub = self.tmp / "key_public.pem"
        switch = () if self.limits else ("--no-rate-limits",)
        self.proc = local.spawn(self.port, str(self.tmp / "emu.db"), [pub], log, (*self.extra_args, *switch))
        local.wait_until_up(self.proc, self.port, SystemClock(), log)
        profile = {
            "endpoint": self.url,
            "auth": {"method": "api_key", "key_file": str(self.key_file), "tenancy": TENANCY, "user": USER},
            "stream": {"name": "bench", "compartment": "ocid1.compartment.oc1..bench"},
            "deadline_s": 120,
            "pace_requests": self.limits,
        }
        if self.group:
            profile["group"] = {"name": self.group}
        self.config = self.tmp / "ocigroup.yaml"
        self.config.write_text(yaml.safe_dump({"default": "bench", "profiles": {"bench": profile}}))
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def admin_request(self, path: str) -> urllib.request.Request:
        """A GET of one of the emulator's own endpoints, with the owner's proof (core/owner.py)."""
        key = local.owner_key()
        assert key is not None
        return urllib.request.Request(self.url + path, headers={owner.HEADER: owner.request(key, "GET", path, b"")})

    def transport(self) -> Transport:
        return Transport(self.url, self.signer)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)


def _tree(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _sample(pid: int) -> tuple[str, int, float]:
    """A process's name, resident memory in KiB and CPU seconds so far (user + system)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        with open(f"/proc/{pid}/stat") as f:
            ticks = f.read().rsplit(")", 1)[1].split()
        cpu = (int(ticks[11]) + int(ticks[12])) / os.sysconf("SC_CLK_TCK")
        return fields["Name"].strip(), int(fields.get("VmRSS", "0 kB").split()[0]), cpu
    except (OSError, KeyError, ValueError, IndexError):
        return "", 0, 0.0


def _pss_kib(pid: int) -> int:
    """A process's proportional set size in KiB: its resident pages, each shared page divided among its sharers
    (forked workers share most of their pages: the sum of their RSS would count those pages once per worker)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    return _sample(pid)[2]


class MemorySampler(threading.Thread):
    """Peak RSS of a process, of the JVMs below it and of the whole tree, the peak of the other processes below it
    (Spark's Python worker daemon and its forked workers: the sum of their PSS at one sample, since they share most
    of their pages), and the CPU time each part used, sampled every 100 ms. CPU is split into the process itself,
    JVMs, and the other processes below it."""

    def __init__(self, pid: int, since_now: bool = False) -> None:
        """`since_now`: count only the CPU used from now on by processes already running (a warm engine's),
        not what they used before."""
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.driver_kib = self.jvm_kib = self.workers_kib = self.tree_kib = 0
        self._cpu: dict[int, tuple[str, float]] = {}  # pid -> (role, CPU seconds last seen)
        self._before = {p: _sample(p)[2] for p in _tree(pid)} if since_now else {}

    def run(self) -> None:
        while not self.stop.wait(0.1):
            total = jvm = workers = 0
            for pid in _tree(self.pid):
                name, kib, cpu = _sample(pid)
                total += kib
                role = "driver" if pid == self.pid else "jvm" if name == "java" else "workers"
                if pid == self.pid:
                    self.driver_kib = max(self.driver_kib, kib)
                elif name == "java":
                    jvm += kib
                elif name:
                    workers += _pss_kib(pid)
                if name:
                    self._cpu[pid] = (role, cpu)
            self.jvm_kib, self.tree_kib = max(self.jvm_kib, jvm), max(self.tree_kib, total)
            self.workers_kib = max(self.workers_kib, workers)

    def cpu(self, role: str) -> float:
        """CPU seconds used by the processes of one role: driver, jvm or workers."""
        return sum(seconds - self._before.get(pid, 0.0) for pid, (r, seconds) in self._cpu.items() if r == role)


def create_stream(transport: Any, body: dict[str, Any]) -> str:
    """CreateStream through a bench transport, then wait until the stream is ACTIVE (it is CREATING for a moment,
    as on the service, and refuses PutMessages until then). Its OCID."""
    sid: str = transport.request("POST", "/streams", body=body).json()["id"]
    deadline = time.monotonic() + 60
    while transport.request("GET", f"/streams/{sid}").json()["lifecycleState"] != "ACTIVE":
        assert time.monotonic() < deadline, f"stream {sid} not ACTIVE after 60 s"
        time.sleep(0.1)
    return sid
