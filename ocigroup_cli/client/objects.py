"""OCI Object Storage for audit exports, through the oci SDK's own ObjectStorageClient and UploadManager (made for
this: multipart, parallel parts, each part's MD5 checked by the service), signed with the profile's credentials.

Built from a profile anywhere an export runs: in the CLI (the commit, verify) and in Spark's tasks, which upload
their slices themselves. The endpoint is the profile's `endpoint` when one is set (the bundled emulator serves
Object Storage beside Streaming), else `export.object_storage_endpoint`, else the region's. The profile's CA
bundle and proxy apply (never for loopback), and every call is retried within the profile's deadline. The SDK is
imported here only: `ocigroup --help` and inspect never pay for it.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocigroup_cli.client.auth import credentials
from ocigroup_cli.client.errors import service_failure
from ocigroup_cli.client.regions import object_storage_endpoint
from ocigroup_cli.client.signing import ApiKeySigner, SdkSigner
from ocigroup_cli.client.transport import proxy_for
from ocigroup_cli.config import Profile
from ocigroup_cli.core.retention import Rule
from ocigroup_cli.core.timefmt import datetime_to_ms, ms_to_rfc3339
from ocigroup_cli.errors import BadAnswer, NotFound, OcigroupError, TransientError

MIN_BYTES_PER_S = 256 << 10  # a transfer slower than this (beyond deadline_s) is an endpoint that trickles
MAX_SMALL_OBJECT_BYTES = 64 << 20  # a manifest names every slice: a few hundred bytes each
PART_BYTES = 128 << 20  # the SDK's default part size: a slice file larger than this goes up in parallel parts
LIST_PAGE = 1000


@dataclass(frozen=True)
class StoredObject:
    name: str
    size: int
    md5: str  # as Object Storage reports it: base64 MD5, or for a multipart object `<md5 of the parts' md5s>-N`
    etag: str = ""


def file_md5(path: Path) -> str:
    """A file's MD5 as Object Storage writes it (base64), read in chunks."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        for chunk in iter(functools.partial(f.read, 1 << 20), b""):
            digest.update(chunk)
    return base64.b64encode(digest.digest()).decode("ascii")


# what the SDK's config check wants to see where the signer carries the identity itself (tokens, principals)
_UNUSED = {
    "tenancy": "ocid1.tenancy.oc1..unused",
    "user": "ocid1.user.oc1..unused",
    "fingerprint": ":".join(["00"] * 16),
}


def _sdk_signer(profile: Profile) -> tuple[dict[str, str], Any]:
    """The oci SDK's config and signer for the profile's credentials (its own signer for tokens and principals;
    for an API key, one made from the key already loaded, so a pass phrase is asked for nowhere else)."""
    import oci
    from cryptography.hazmat.primitives import serialization

    creds = credentials(profile)
    signer = creds.signer
    config = {**_UNUSED, "key_content": "(in the signer)", "region": creds.region}
    if isinstance(signer, SdkSigner):
        return config, signer.sdk_signer
    assert isinstance(signer, ApiKeySigner)
    tenancy, user, fingerprint = signer.key_id.split("/", 2)
    pem = signer.private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    config.update(tenancy=tenancy, user=user, fingerprint=fingerprint)
    return config, oci.signer.Signer(tenancy, user, fingerprint, None, private_key_content=pem.decode("ascii"))


def _failure(operation: str, exc: Exception) -> OcigroupError:
    """The CLI's error for what the SDK raised: the service's answer, or a transport failure (worth a retry)."""
    import oci

    if isinstance(exc, oci.exceptions.ServiceError):
        return service_failure(operation, exc.status, exc.code, exc.message, exc.request_id)
    detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return TransientError(f"{operation} failed: Object Storage did not answer ({detail}).",
                          "check the endpoint and the network, then run it again")  # fmt: skip


class ObjectStore:
    """One bucket of the tenancy's namespace (looked up when not given), for one profile."""

    def __init__(self, profile: Profile, bucket: str, namespace: str | None = None) -> None:
        import oci

        settings = profile.settings
        self.endpoint = str(
            settings.endpoint or settings.export.object_storage_endpoint or object_storage_endpoint(settings.region)
        )
        retry = (
            oci.retry.RetryStrategyBuilder(max_attempts=8, total_elapsed_time_seconds=settings.deadline_s)
            .add_service_error_check()
            .get_retry_strategy()
        )
        config, signer = _sdk_signer(profile)
        self.client = oci.object_storage.ObjectStorageClient(
            config, signer=signer, service_endpoint=self.endpoint, retry_strategy=retry, timeout=(10, 120)
        )
        session = self.client.base_client.session
        session.trust_env = False  # the profile's proxy, never for loopback (client/transport.py decides)
        proxy = proxy_for(self.endpoint)
        if proxy is not None:
            session.proxies = {"https": proxy.url, "http": proxy.url}
        if settings.cert_bundle:
            session.verify = settings.cert_bundle
        self.bucket = bucket
        self._namespace = namespace
        self.deadline_s = float(settings.deadline_s)

    @property
    def namespace(self) -> str:
        if self._namespace is None:
            self._namespace = str(self._call("GetNamespace", self.client.get_namespace).data)
        return self._namespace

    def _call(self, operation: str, method: Any, *args: Any, size: int = 0, **kwargs: Any) -> Any:
        """One SDK call, mapped to the CLI's errors and held to its time limit: `deadline_s`, plus the time `size`
        bytes take at MIN_BYTES_PER_S. A socket timeout counts from each byte, so an endpoint that trickles would
        outlive it: the call runs on a thread of its own, and one over its limit is given up (its connections
        closed under it) with one line, exit 4."""
        limit = self.deadline_s + size / MIN_BYTES_PER_S
        done: list[Any] = []

        def work() -> None:
            try:
                done.append((True, method(*args, **kwargs)))
            except Exception as exc:  # noqa: BLE001 - the SDK raises its own and requests' errors; each is mapped
                done.append((False, exc))

        thread = threading.Thread(target=work, name=f"objects-{operation}", daemon=True)
        thread.start()
        thread.join(limit)
        if not done:
            self.client.base_client.session.close()
            raise TransientError(
                f"{operation}: {self.endpoint} did not answer whole within {limit:.0f} s.",
                "is the endpoint right, and the network sound? (deadline_s sets the limit)",
            )
        ok, value = done[0]
        if not ok:
            raise _failure(operation, value) from None
        return value

    def check_bucket(self) -> None:
        """NotFound (BucketNotFound, or a namespace that is not the tenancy's) when the bucket is not there."""
        self._call("HeadBucket", self.client.head_bucket, self.namespace, self.bucket)

    def create_bucket(self, compartment: str) -> None:
        from oci.object_storage.models import CreateBucketDetails

        details = CreateBucketDetails(name=self.bucket, compartment_id=compartment)
        self._call("CreateBucket", self.client.create_bucket, self.namespace, details)

    def head(self, name: str) -> StoredObject | None:
        try:
            h = self._call("HeadObject", self.client.head_object, self.namespace, self.bucket, name).headers
        except NotFound:
            return None
        md5 = h.get("opc-multipart-md5") or h.get("opc-content-md5") or h.get("content-md5") or ""
        return StoredObject(name, int(h.get("content-length", 0)), md5, h.get("etag", ""))

    def listing(self, prefix: str) -> list[StoredObject]:
        """Every object under `prefix`, in name order, with its size and MD5."""
        found: list[StoredObject] = []
        start = None
        while True:
            page = self._call("ListObjects", self.client.list_objects, self.namespace, self.bucket, prefix=prefix,
                              start=start, limit=LIST_PAGE, fields="name,size,md5,etag").data  # fmt: skip
            found += [StoredObject(o.name, int(o.size or 0), o.md5 or "", o.etag or "") for o in page.objects]
            start = page.next_start_with
            if not start:
                return found

    def put_file(self, name: str, path: Path, *, only_new: bool = True) -> str:
        """Upload `path` as `name` (in parallel parts past PART_BYTES; a single part is sent with its Content-MD5,
        each part of a multipart upload with its own), refused by the service if `name` exists and `only_new`.
        The object's MD5 as Object Storage reports it."""
        from oci.object_storage import UploadManager

        md5 = file_md5(path)
        extra: dict[str, Any] = {"if_none_match": "*"} if only_new else {}
        manager = UploadManager(self.client, allow_parallel_uploads=True, parallel_process_count=3)
        answer = self._call("PutObject", manager.upload_file, self.namespace, self.bucket, name, str(path),
                            part_size=PART_BYTES, content_md5=md5, size=path.stat().st_size, **extra)  # fmt: skip
        headers = answer.headers
        return str(headers.get("opc-multipart-md5") or headers.get("opc-content-md5") or md5)

    def put_bytes(self, name: str, data: bytes, *, only_new: bool = True) -> str:
        """A small object (the manifest), with its Content-MD5; refused if `name` exists and `only_new`."""
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")
        extra: dict[str, Any] = {"if_none_match": "*"} if only_new else {}
        self._call("PutObject", self.client.put_object, self.namespace, self.bucket, name, data, content_md5=md5,
                   content_type="application/json", **extra)  # fmt: skip
        return md5

    def get_bytes(self, name: str, limit: int = MAX_SMALL_OBJECT_BYTES) -> bytes:
        """A small object (a manifest), whole; one larger than `limit` is refused (BadAnswer), never read whole."""

        def read() -> bytes:
            raw = self.client.get_object(self.namespace, self.bucket, name).data.raw
            return bytes(raw.read(limit + 1, decode_content=False))

        data: bytes = self._call("GetObject", read, size=limit)
        if len(data) > limit:
            raise BadAnswer(f"GetObject {name}: larger than {limit:,} bytes, more than such an object ever is.",
                            "is it the right object?")  # fmt: skip
        return data

    @contextlib.contextmanager
    def fetched(self, name: str, directory: Path) -> Iterator[Path]:
        """`name` downloaded into `directory` a chunk at a time (bounded memory), removed afterwards."""
        path = directory / Path(name).name
        size = self.head(name)

        def download() -> None:
            answer = self.client.get_object(self.namespace, self.bucket, name)
            with path.open("wb") as f:
                for chunk in answer.data.raw.stream(1 << 20, decode_content=False):
                    f.write(chunk)

        try:
            self._call("GetObject", download, size=size.size if size is not None else 0)
            yield path
        finally:
            path.unlink(missing_ok=True)

    def delete(self, name: str) -> None:
        self._call("DeleteObject", self.client.delete_object, self.namespace, self.bucket, name)

    def retention_rules(self) -> list[Rule]:
        rules = self._call("ListRetentionRules", self.client.list_retention_rules, self.namespace, self.bucket).data
        out = []
        for item in rules.items:
            duration = item.duration
            days = None
            if duration is not None:
                days = float(duration.time_amount) * (365 if duration.time_unit == "YEARS" else 1)
            locked = ms_to_rfc3339(datetime_to_ms(item.time_rule_locked)) if item.time_rule_locked else None
            out.append(Rule(item.id, item.display_name, days, locked))
        return out


def expected_md5(path: Path) -> str:
    """The MD5 Object Storage reports for `path` uploaded by put_file: the file's, or past PART_BYTES the multipart
    form (MD5 of the parts' MD5s, then `-N`), so an object a retried task already uploaded can be recognised."""
    size = path.stat().st_size
    if size <= PART_BYTES:
        return file_md5(path)
    parts = hashlib.md5(usedforsecurity=False)
    count = 0
    with path.open("rb") as f:
        while block := f.read(PART_BYTES):
            parts.update(hashlib.md5(block, usedforsecurity=False).digest())
            count += 1
    return f"{base64.b64encode(parts.digest()).decode('ascii')}-{count}"
