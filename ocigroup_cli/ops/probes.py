"""The permission probes of `ocigroup doctor` (ops/doctor.py): for each permission a command needs, one call
that changes nothing, and on a 404 the narrowest statement that grants it (a 404 is also what a missing resource
gets: both causes are named). What cannot be probed without writing (PutMessages, PutObject, PostMetricData) is
said to be not probed, unless `write_probes`: then a probe object or metric that says what it is (the object
deleted again where the bucket's retention allows). A message is never written: it cannot be taken back, and
every consumer of the stream would read it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from ocigroup_cli.client.buckets import BucketClient
from ocigroup_cli.client.monitoring import MonitoringClient
from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import Profile
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import NotFound, OcigroupError
from ocigroup_cli.iam.advice import statements
from ocigroup_cli.iam.permissions import grant_of
from ocigroup_cli.ops.check import FAIL, OK, SKIPPED, WARN, Check, Identity

# which commands need each permission (docs/profiles.md has the whole table)
NEEDED_BY = {
    "STREAM_INSPECT": "every command, to find a stream by name",
    "STREAM_READ": "every command, to find the stream",
    "STREAM_CONSUME": "tail, inspect, reset, cursor, export",
    "STREAM_PRODUCE": "publish, tail --dead-letter-stream",
    "BUCKET_READ": "export to a bucket",
    "OBJECT_INSPECT": "export to a bucket",
    "OBJECT_CREATE": "export to a bucket (manage objects: create, overwrite, multipart, read back)",
    "METRIC_WRITE": "inspect --post-metrics",
}
PROBE_PREFIX = "ocigroup-doctor-probe/"


class Probes:
    def __init__(self, profile: Profile, identity: Identity | None, clock: Clock, write_probes: bool) -> None:
        self.profile = profile
        self.tenancy = identity.tenancy if identity else None
        self.write_probes = write_probes
        self.clock = clock
        self.client = StreamingClient(profile, self.clock)
        self.stream: StreamInfo | None = None
        self.compartment = profile.settings.stream.compartment  # the stream's, once GetStream tells it

    def run(self) -> Iterator[Check]:
        try:
            yield from self._stream_checks()
            yield from self._bucket_checks()
            yield self._metrics_check()
        finally:
            self.client.close()

    def _refused(self, check: str, permission: str, call: str, error: OcigroupError, target: str | None) -> Check:
        """A probe's failure: a 404 names both causes and the statement; anything else says what it was."""
        if not isinstance(error, NotFound):
            return Check(check, FAIL, f"{call}: {error.message}", error.hint)
        grant = grant_of(permission)
        found = statements(permission, self.compartment, target)
        detail = f"{call}: {error.status} {error.code}: it does not exist, or your user lacks `{grant}` on it"
        return Check(check, FAIL, f"{detail} (needed by {NEEDED_BY[permission]})", found[0], found)

    def _probe(self, check: str, permission: str, call: str, target: str | None, work: Callable[[], str]) -> Check:
        try:
            return Check(check, OK, work())
        except OcigroupError as exc:
            return self._refused(check, permission, call, exc, target)

    # -- Streaming ------------------------------------------------------------------------------------------

    def _stream_checks(self) -> Iterator[Check]:
        s = self.profile.settings.stream
        stream_id = s.id
        if not stream_id:
            listed = self._list_check()
            yield listed
            if listed.status != OK or self.stream is None:
                yield Check("stream", SKIPPED, "needs the stream found by name")
                return
            stream_id = self.stream.id
        yield self._probe("stream", "STREAM_READ", "GetStream", stream_id, lambda: self._get_stream(stream_id))
        if self.stream is None and self.profile.settings.endpoint:  # the data plane is the profile's endpoint
            # its partition count unknown (0): the answers are not held to one
            self.stream = StreamInfo(stream_id, s.name or stream_id, 0, None, "", "", None, self.compartment)
        if self.stream is None:
            yield Check("stream-consume", SKIPPED, "needs GetStream (the stream's messages endpoint)")
            return
        consume = self._probe("stream-consume", "STREAM_CONSUME", "CreateCursor", self.stream.id, self._cursor)
        yield consume
        yield self._group_check(consume.status == OK)
        produce = statements("STREAM_PRODUCE", self.compartment, self.stream.id)
        yield Check(
            "stream-produce",
            SKIPPED,
            f"not probed: a message cannot be taken back (needed by {NEEDED_BY['STREAM_PRODUCE']}); if those "
            f"fail with 404, grant `{grant_of('STREAM_PRODUCE')}`",
            produce[0],
            produce,
        )

    def _list_check(self) -> Check:
        s = self.profile.settings.stream
        if not (s.name and s.compartment):
            return Check(
                "stream-list",
                FAIL,
                "the profile names no stream",
                "set stream.id, or stream.name and stream.compartment",
            )
        try:
            found = [x for x in self.client.list_streams(s.compartment, s.name) if x.state == "ACTIVE"]
        except OcigroupError as exc:
            return self._refused("stream-list", "STREAM_INSPECT", "ListStreams", exc, None)
        if not found:
            return Check(
                "stream-list",
                FAIL,
                f"no ACTIVE stream named {s.name!r} in {s.compartment}",
                "check stream.name and stream.compartment",
            )
        self.stream = found[0]
        return Check("stream-list", OK, f"ListStreams finds {s.name!r} in {s.compartment}: {found[0].id}")

    def _get_stream(self, stream_id: str) -> str:
        self.stream = info = self.client.get_stream(stream_id)
        self.compartment = info.compartment or self.compartment
        return f"{info.name!r} ({info.id}), {info.partitions} partition(s), {info.state}, in {info.compartment}"

    def _cursor(self) -> str:
        assert self.stream is not None
        self.client.create_cursor(self.stream, 0, "LATEST")
        return f"CreateCursor (LATEST, partition 0) answered: `{grant_of('STREAM_CONSUME')}` is granted"

    def _group_check(self, consume_ok: bool) -> Check:
        group = self.profile.settings.group.name
        if not group:
            return Check("group", SKIPPED, "the profile names no group")
        if not consume_ok:
            return Check("group", SKIPPED, f"GetGroup needs `{grant_of('STREAM_CONSUME')}` (above)")
        assert self.stream is not None
        try:
            reservations = self.client.get_group(self.stream, group)
        except NotFound:  # the permission passed above: this 404 is the group's own
            return Check("group", OK, f"group {group!r} does not exist yet: the first `ocigroup tail` creates it")
        except OcigroupError as exc:
            return Check("group", FAIL, f"GetGroup: {exc.message}", exc.hint)
        return Check("group", OK, f"group {group!r}: {len(reservations)} partition reservation(s)")

    # -- Object Storage -------------------------------------------------------------------------------------

    def _bucket_checks(self) -> Iterator[Check]:
        bucket = self.profile.settings.export.bucket
        if not bucket:
            yield Check("bucket", SKIPPED, "the profile names no export.bucket")
            return
        storage = BucketClient(self.profile, self.clock)
        try:
            yield from self._bucket_probes(storage, bucket)
        finally:
            storage.close()

    def _bucket_probes(self, storage: BucketClient, bucket: str) -> Iterator[Check]:
        try:
            namespace = storage.namespace()
        except OcigroupError as exc:
            yield Check("bucket", FAIL, f"GetNamespace: {exc.message}", exc.hint)
            return
        where: dict[str, Any] = {}

        def read() -> str:
            where.update(storage.get_bucket(namespace, bucket))
            storage.list_retention_rules(namespace, bucket)
            found = where.get("compartmentId")
            return f"{bucket!r} in namespace {namespace!r}, compartment {found} (GetBucket, ListRetentionRules)"

        self.compartment = None  # the bucket's compartment, once GetBucket tells it
        first = self._probe("bucket", "BUCKET_READ", "GetBucket", bucket, read)
        yield first
        self.compartment = where.get("compartmentId")
        yield self._probe(
            "objects-list", "OBJECT_INSPECT", "ListObjects", bucket, lambda: self._list(storage, namespace, bucket)
        )
        yield self._write_check(storage, namespace, bucket)

    @staticmethod
    def _list(storage: BucketClient, namespace: str, bucket: str) -> str:
        storage.list_objects(namespace, bucket)
        return f"ListObjects answered: `{grant_of('OBJECT_INSPECT')}` is granted"

    def _write_check(self, storage: BucketClient, namespace: str, bucket: str) -> Check:
        grant = statements("OBJECT_CREATE", self.compartment, bucket)
        if not self.write_probes:
            return Check(
                "objects-write",
                SKIPPED,
                f"not probed: PutObject writes (--write-probes writes one probe object and deletes it); export to "
                f"the bucket needs `{grant_of('OBJECT_CREATE')}`",
                grant[0],
                grant,
            )
        name = f"{PROBE_PREFIX}{self.clock.time_ms()}-{os.getpid()}.txt"
        text = "Written by `ocigroup doctor --write-probes` to check that exports may write here; safe to delete."
        try:
            storage.put_text(namespace, bucket, name, text)
        except OcigroupError as exc:
            return self._refused("objects-write", "OBJECT_CREATE", "PutObject", exc, bucket)
        try:
            storage.delete_object(namespace, bucket, name)
        except OcigroupError as exc:
            detail = f"PutObject passed; the probe object {name} stays: {exc.message}"
            return Check("objects-write", WARN, detail, f"delete {name} once the bucket's retention allows")
        return Check("objects-write", OK, f"PutObject and DeleteObject of a probe object passed ({name})")

    # -- Monitoring -----------------------------------------------------------------------------------------

    def _metrics_check(self) -> Check:
        m = self.profile.settings.metrics
        compartment = m.compartment or (self.stream.compartment if self.stream else None) or self.tenancy
        self.compartment = compartment
        grant = statements("METRIC_WRITE", compartment, m.namespace)
        if not self.write_probes:
            return Check(
                "metrics-write",
                SKIPPED,
                f"not probed: PostMetricData posts (--write-probes posts one datapoint of ocigroup_doctor_probe); "
                f"inspect --post-metrics needs `{grant_of('METRIC_WRITE')}`",
                grant[0],
                grant,
            )
        datum = {
            "namespace": m.namespace, "compartmentId": compartment, "name": "ocigroup_doctor_probe",
            "dimensions": {"probe": "ocigroup doctor --write-probes"},
            "datapoints": [{"timestamp": ms_to_rfc3339(self.clock.time_ms()), "value": 1}],
        }  # fmt: skip
        client = MonitoringClient(self.profile, self.clock)
        try:
            answer = client.post_metric_data([datum])
        except OcigroupError as exc:
            return self._refused("metrics-write", "METRIC_WRITE", "PostMetricData", exc, m.namespace)
        finally:
            client.close()
        if answer.get("failedMetricsCount"):
            return Check("metrics-write", FAIL, f"PostMetricData refused the probe: {answer.get('failedMetrics')}")
        return Check("metrics-write", OK, f"PostMetricData accepted a probe datapoint in {m.namespace!r}")
