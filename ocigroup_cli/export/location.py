"""Where an export lands: a local directory, or an Object Storage prefix written as OCI Data Flow and the HDFS
connector write it, `oci://BUCKET@NAMESPACE/PREFIX` (`oci://BUCKET/PREFIX` looks the namespace up)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ocigroup_cli.errors import UsageError

SCHEME = "oci://"
MANIFEST_OBJECT = "manifest.json"
DATA_OBJECT = re.compile(r"partition-\d{4}-\d{3}\.(parquet|jsonl|csv)")  # an export's file, as plan.Slice names it
_BUCKET = re.compile(r"[A-Za-z0-9._-]{1,256}")
_NAMESPACE = re.compile(r"[A-Za-z0-9_-]{1,128}")


@dataclass(frozen=True)
class BucketPrefix:
    bucket: str
    namespace: str | None
    prefix: str  # without a slash at either end: the export's objects are PREFIX/<name>

    @property
    def uri(self) -> str:
        at = f"@{self.namespace}" if self.namespace else ""
        return f"{SCHEME}{self.bucket}{at}/{self.prefix}"

    def object(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    @property
    def manifest(self) -> str:
        return self.object(MANIFEST_OBJECT)

    @property
    def above(self) -> list[str]:
        """The manifests an export at each prefix above this one would have (`a/b/c`: `a/manifest.json`,
        `a/b/manifest.json`)."""
        parts = self.prefix.split("/")
        return ["/".join(parts[:n]) + "/" + MANIFEST_OBJECT for n in range(1, len(parts))]

    def in_namespace(self, namespace: str) -> BucketPrefix:
        return BucketPrefix(self.bucket, namespace, self.prefix)

    def is_export_file(self, name: str) -> bool:
        """Whether object `name` is one an export to this prefix writes (directly under it, named as a slice's
        file): only such objects are ever removed as an unfinished run's."""
        return name.startswith(self.prefix + "/") and DATA_OBJECT.fullmatch(name[len(self.prefix) + 1 :]) is not None


def is_bucket(text: str) -> bool:
    return text.startswith(SCHEME)


def parse_bucket(text: str, flag: str = "--out") -> BucketPrefix:
    """`oci://BUCKET[@NAMESPACE]/PREFIX`; a UsageError naming what is wrong otherwise."""
    shape = "oci://BUCKET@NAMESPACE/PREFIX (or oci://BUCKET/PREFIX)"
    rest = text[len(SCHEME) :] if is_bucket(text) else ""
    head, slash, prefix = rest.partition("/")
    bucket, at, namespace = head.partition("@")
    prefix = prefix.strip("/")
    if not slash or not prefix:
        raise UsageError(f"{flag} {text}: an export needs a prefix of its own in the bucket.", f"write {shape}")
    if not _BUCKET.fullmatch(bucket):
        raise UsageError(f"{flag} {text}: {bucket!r} is not a bucket name (letters, digits, '.', '_', '-').",
                         f"write {shape}")  # fmt: skip
    if at and not _NAMESPACE.fullmatch(namespace):
        raise UsageError(f"{flag} {text}: {namespace!r} is not a namespace.", f"write {shape}")
    if any(part in ("", ".", "..") for part in prefix.split("/")):
        raise UsageError(f"{flag} {text}: the prefix {prefix!r} has an empty, '.' or '..' part.", f"write {shape}")
    return BucketPrefix(bucket, namespace or None, prefix)
