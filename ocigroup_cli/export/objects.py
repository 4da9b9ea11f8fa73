"""The Spark tasks' side of an export to Object Storage (`--out oci://…`): each task writes its slice's file on its
own disk, reads its facts back, uploads it under the export's prefix with the profile's credentials (only if no
object has that name: a retried attempt recognises its own upload by size and MD5) and removes it, so no data
passes through the driver. A partition cut into several slices is hashed across its objects by a task too."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocigroup_cli.client.objects import ObjectStore, expected_md5
from ocigroup_cli.errors import OcigroupError, PreconditionFailed, ServiceError
from ocigroup_cli.export import manifest
from ocigroup_cli.export.location import BucketPrefix, parse_bucket
from ocigroup_cli.export.plan import Plan
from ocigroup_cli.export.progress import Stopped, in_hand
from ocigroup_cli.export.reader import profile_of
from ocigroup_cli.export.scratch import scratch

if TYPE_CHECKING:
    import pyarrow as pa

DIGEST_DDL = "partition INT, sha STRING"


def store_for(plan: Plan, where: BucketPrefix) -> ObjectStore:
    return ObjectStore(profile_of(plan), where.bucket, where.namespace)


def upload(store: ObjectStore, name: str, path: Path) -> str:
    """Upload `path` as `name`, only if no object has that name; the object's MD5 as the service reports it. An
    object already there with the same size and MD5 is this slice's, from an attempt that failed after its upload;
    one with other content is a killed run's, landed after the prefix was cleared (the run holds the prefix's
    claim: no live run of this machine writes there): removed, and this one uploaded in its place."""
    for attempt in range(2):
        with contextlib.suppress(PreconditionFailed):  # the name is taken: whose is it?
            return store.put_file(name, path)
        there = store.head(name)
        if there is not None and there.size == path.stat().st_size and there.md5 == expected_md5(path):
            return there.md5
        if attempt == 0:
            try:
                store.delete(name)
            except ServiceError as exc:
                raise OcigroupError(f"{name}: an object of that name is in the way and cannot be removed "
                                    f"({exc.message}).", "export to another prefix") from None  # fmt: skip
    raise OcigroupError(f"{name}: an object of that name keeps appearing during the export, with other content.",
                        "another export may be writing to the same prefix")  # fmt: skip


def to_bucket(
    plan: Plan, file_name: str, where: BucketPrefix, store: ObjectStore, write: Callable[[Path], int], fmt: str
) -> manifest.FileStats | None:
    """Write a slice with `write` into a file of this worker's own, read its facts back, upload it, remove it."""
    try:
        with scratch() as tmp, in_hand(plan.progress, file_name) as stopped:  # a run cleaning up waits for it
            path = tmp / file_name
            if not write(path):
                return None
            st = manifest.facts(path, fmt)
            if stopped():
                raise Stopped(f"{file_name}: not uploaded, the export was stopped")
            st.object_md5 = upload(store, where.object(file_name), path)
            return st
    except Stopped as exc:
        raise OcigroupError(str(exc)) from None


def partition_digests(store: ObjectStore, where: BucketPrefix, names: list[str], fmt: str) -> str:
    """The SHA-256 of one partition's rows across its objects (in name order), each fetched in turn."""
    running = hashlib.sha256()
    with scratch() as tmp:
        for name in names:
            with store.fetched(where.object(name), tmp) as path:
                manifest.read_facts(path, fmt, (running,))
    return running.hexdigest()


def digest_task(plan_json: str, fmt: str, uri: str, groups: list[tuple[int, list[str]]]) -> Callable[..., Any]:
    """The function Spark maps over the numbers of `groups` (partition, its objects' names): each partition's
    digest, computed where the objects are read, not on the driver."""

    def run(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        plan, where = Plan.from_json(plan_json), parse_bucket(uri)
        store = store_for(plan, where)
        schema = pa.schema([("partition", pa.int32()), ("sha", pa.string())])
        for chunk in numbers:
            for i in chunk.column(0).to_pylist():
                partition, names = groups[i]
                sha = partition_digests(store, where, names, fmt)
                yield pa.RecordBatch.from_pydict({"partition": [partition], "sha": [sha]}, schema)

    return run
