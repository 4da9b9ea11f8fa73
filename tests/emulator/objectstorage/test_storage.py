"""Object Storage in the emulator, through the SDK's own ObjectStorageClient and UploadManager (unmodified, pointed
at the emulator's address): namespace, buckets, objects, ranges, conditions, Content-MD5, listing, multipart."""

from __future__ import annotations

import base64
import hashlib
import os

import oci
import pytest
from oci._vendor import requests

from tests.helpers.service import ApiKey

COMPARTMENT = "ocid1.compartment.oc1..test"
M = oci.object_storage.models


def storage_client(url: str, key: ApiKey) -> oci.object_storage.ObjectStorageClient:
    return oci.object_storage.ObjectStorageClient(
        key.config(), signer=key.signer(), service_endpoint=url, retry_strategy=oci.retry.NoneRetryStrategy()
    )


@pytest.fixture
def osc(emulator, api_key):
    return storage_client(emulator.url, api_key)


@pytest.fixture
def bucket(osc) -> str:
    osc.create_bucket("emulator", M.CreateBucketDetails(name="audit", compartment_id=COMPARTMENT))
    return "audit"


def refused(call) -> oci.exceptions.ServiceError:
    with pytest.raises(oci.exceptions.ServiceError) as info:
        call()
    return info.value


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def test_namespace_and_buckets(osc, emulator, api_key):
    assert osc.get_namespace().data == "emulator"
    assert osc.get_namespace(compartment_id=COMPARTMENT).data == "emulator"
    signer = oci.signer.Signer.from_config(api_key.config())
    assert requests.get(emulator.url + "/n/", auth=signer, timeout=10).json() == "emulator"  # GET /n/ too

    made = osc.create_bucket("emulator", M.CreateBucketDetails(name="b-1.x", compartment_id=COMPARTMENT))
    assert (made.data.name, made.data.namespace, made.data.compartment_id) == ("b-1.x", "emulator", COMPARTMENT)
    assert made.data.created_by == "ocid1.user.oc1..aaaaaaaatestuser" and made.data.id.startswith("ocid1.bucket.")
    got = osc.get_bucket("emulator", "b-1.x", fields=["approximateCount", "approximateSize"])
    assert got.data.etag == made.data.etag == got.headers["etag"]
    assert (got.data.approximate_count, got.data.approximate_size) == (0, 0)
    assert osc.head_bucket("emulator", "b-1.x").status == 200
    again = refused(lambda: osc.create_bucket("emulator", M.CreateBucketDetails(name="b-1.x", compartment_id="c")))
    assert (again.status, again.code) == (409, "BucketAlreadyExists")
    bad = refused(lambda: osc.create_bucket("emulator", M.CreateBucketDetails(name="a b", compartment_id="c")))
    assert (bad.status, bad.code) == (400, "InvalidBucketName")
    osc.create_bucket("emulator", M.CreateBucketDetails(name="a2", compartment_id=COMPARTMENT))
    osc.create_bucket("emulator", M.CreateBucketDetails(name="other", compartment_id="ocid1.compartment.oc1..other"))
    listed = osc.list_buckets("emulator", COMPARTMENT, limit=1)
    assert [b.name for b in listed.data] == ["a2"] and listed.headers["opc-next-page"]
    rest = osc.list_buckets("emulator", COMPARTMENT, page=listed.headers["opc-next-page"])
    assert [b.name for b in rest.data] == ["b-1.x"] and "opc-next-page" not in rest.headers

    osc.put_object("emulator", "a2", "x", b"1")
    full = refused(lambda: osc.delete_bucket("emulator", "a2"))
    assert (full.status, full.code) == (409, "BucketNotEmpty")
    osc.delete_object("emulator", "a2", "x")
    assert osc.delete_bucket("emulator", "a2").status == 204
    assert refused(lambda: osc.head_bucket("emulator", "a2")).status == 404


def test_put_get_head_list_delete(osc, bucket):
    data = os.urandom(70_000)
    put = osc.put_object(
        "emulator", bucket, "dir/one.bin", data, content_type="application/x-test", opc_meta={"digest": "abc"}
    )
    assert put.headers["opc-content-md5"] == md5_b64(data)
    assert put.headers["etag"] and put.headers["last-modified"] and put.headers["version-id"]
    got = osc.get_object("emulator", bucket, "dir/one.bin")
    assert got.data.content == data
    assert got.headers["etag"] == put.headers["etag"] and got.headers["opc-content-md5"] == md5_b64(data)
    assert got.headers["content-type"] == "application/x-test" and got.headers["opc-meta-digest"] == "abc"
    assert "opc-multipart-md5" not in got.headers
    head = osc.head_object("emulator", bucket, "dir/one.bin")
    assert (
        int(head.headers["content-length"]) == len(data)
        and head.headers["last-modified"] == put.headers["last-modified"]
    )
    fields = "name,size,md5,etag,timeCreated,timeModified"
    (summary,) = osc.list_objects("emulator", bucket, fields=fields).data.objects
    assert (summary.name, summary.size, summary.md5, summary.etag) == (
        "dir/one.bin",
        len(data),
        md5_b64(data),
        put.headers["etag"],
    )
    assert summary.time_created is not None and summary.time_modified is not None
    (bare,) = osc.list_objects("emulator", bucket).data.objects  # by default, the name alone
    assert bare.name == "dir/one.bin" and bare.size is None and bare.md5 is None

    second = osc.put_object("emulator", bucket, "dir/one.bin", b"overwritten")  # an overwrite: a new ETag
    assert second.headers["etag"] != put.headers["etag"]
    assert osc.get_object("emulator", bucket, "dir/one.bin").data.content == b"overwritten"
    assert osc.delete_object("emulator", bucket, "dir/one.bin").status == 204
    gone = refused(lambda: osc.get_object("emulator", bucket, "dir/one.bin"))
    assert (gone.status, gone.code) == (404, "ObjectNotFound")
    assert osc.list_objects("emulator", bucket).data.objects == []
    osc.put_object("emulator", bucket, "empty", b"")
    assert osc.get_object("emulator", bucket, "empty").data.content == b""


def test_ranges(osc, bucket):
    osc.put_object("emulator", bucket, "r", b"0123456789")
    for asked, expected, span in [
        ("bytes=2-4", b"234", "bytes 2-4/10"),
        ("bytes=7-", b"789", "bytes 7-9/10"),
        ("bytes=-3", b"789", "bytes 7-9/10"),
        ("bytes=8-100", b"89", "bytes 8-9/10"),
    ]:
        got = osc.get_object("emulator", bucket, "r", range=asked)
        assert (got.status, got.data.content, got.headers["content-range"]) == (206, expected, span)
        assert got.headers["opc-content-md5"] == md5_b64(b"0123456789")  # the object's, not the range's
    for bad in ("bytes=10-", "bytes=5-2", "bytes=0-1,3-4", "lines=1-2"):
        error = refused(lambda bad=bad: osc.get_object("emulator", bucket, "r", range=bad))
        assert (error.status, error.code) == (416, "InvalidRange"), bad


def test_if_none_match_refuses_an_existing_object_and_if_match_a_stale_etag(osc, bucket):
    first = osc.put_object("emulator", bucket, "manifest.json", b"first", if_none_match="*")
    error = refused(lambda: osc.put_object("emulator", bucket, "manifest.json", b"second", if_none_match="*"))
    assert (error.status, error.code) == (412, "IfNoneMatchFailed")
    assert osc.get_object("emulator", bucket, "manifest.json").data.content == b"first"
    stale = refused(lambda: osc.put_object("emulator", bucket, "manifest.json", b"x", if_match="not-the-etag"))
    assert (stale.status, stale.code) == (412, "IfMatchFailed")
    swapped = osc.put_object("emulator", bucket, "manifest.json", b"third", if_match=first.headers["etag"])
    assert osc.get_object("emulator", bucket, "manifest.json").data.content == b"third"
    assert refused(lambda: osc.delete_object("emulator", bucket, "manifest.json", if_match="stale")).status == 412
    etag = swapped.headers["etag"]
    assert refused(lambda: osc.get_object("emulator", bucket, "manifest.json", if_none_match=etag)).status == 304
    wrong = refused(lambda: osc.put_object("emulator", bucket, "n", b"x", if_none_match="some-etag"))
    assert (wrong.status, wrong.code) == (400, "InvalidParameter")


def test_a_bad_content_md5_is_refused_and_nothing_is_stored(osc, bucket):
    body = b"the evidence"
    wrong = md5_b64(b"something else")
    error = refused(lambda: osc.put_object("emulator", bucket, "e", body, content_md5=wrong))
    assert (error.status, error.code) == (400, "UnmatchedContentMD5")
    assert error.message == (
        f"The computed MD5 of the request body ({md5_b64(body)}) does not match the Content-MD5 header ({wrong})"
    )
    assert refused(lambda: osc.head_object("emulator", bucket, "e")).status == 404
    garbage = refused(lambda: osc.put_object("emulator", bucket, "e", body, content_md5="not-base64!"))
    assert (garbage.status, garbage.code) == (400, "InvalidContentMD5")
    assert osc.put_object("emulator", bucket, "e", body, content_md5=md5_b64(body)).status == 200


def test_list_objects_pages_with_start_limit_and_next_start_with(osc, bucket):
    names = [f"part-{i:03d}" for i in range(25)] + ["z-last"]
    for name in names:
        osc.put_object("emulator", bucket, name, name.encode())
    seen, start = [], None
    while True:
        kwargs = {"limit": 10, "prefix": "part-"}
        if start:
            kwargs["start"] = start
        page = osc.list_objects("emulator", bucket, **kwargs).data
        seen += [o.name for o in page.objects]
        start = page.next_start_with
        if start is None:
            break
        assert start == f"part-{len(seen):03d}"  # where the next page starts, inclusive
    assert seen == names[:25]
    bounded = osc.list_objects("emulator", bucket, start="part-010", end="part-013").data
    assert [o.name for o in bounded.objects] == ["part-010", "part-011", "part-012"]
    after = osc.list_objects("emulator", bucket, start_after="part-023").data
    assert [o.name for o in after.objects] == ["part-024", "z-last"]
    for bad in ({"limit": 0}, {"limit": 1001}):
        assert refused(lambda bad=bad: osc.list_objects("emulator", bucket, **bad)).code == "InvalidLimit"


def test_delimiter_rolls_names_up_into_prefixes(osc, bucket):
    for name in ("a/1", "a/2", "a/x/3", "b/x/1", "b/y", "c", "d/"):
        osc.put_object("emulator", bucket, name, b".")
    top = osc.list_objects("emulator", bucket, delimiter="/").data
    assert ([o.name for o in top.objects], top.prefixes) == (["c"], ["a/", "b/", "d/"])
    under_a = osc.list_objects("emulator", bucket, delimiter="/", prefix="a/").data
    assert ([o.name for o in under_a.objects], under_a.prefixes) == (["a/1", "a/2"], ["a/x/"])
    seen, start = [], None  # a prefix counts as one entry of a page; pages never repeat one
    while True:
        page = osc.list_objects("emulator", bucket, delimiter="/", limit=1, **({"start": start} if start else {}))
        seen += page.data.prefixes + [o.name for o in page.data.objects]
        start = page.data.next_start_with
        if start is None:
            break
    assert seen == ["a/", "b/", "c", "d/"]
    error = refused(lambda: osc.list_objects("emulator", bucket, delimiter=","))
    assert (error.status, error.code) == (400, "InvalidParameter")


def test_upload_manager_uploads_in_parallel_parts(osc, bucket, tmp_path):
    data = os.urandom(5 * 1024 * 1024 + 12_345)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    manager = oci.object_storage.UploadManager(osc, allow_parallel_uploads=True, parallel_process_count=4)
    answer = manager.upload_file("emulator", bucket, "exports/big.bin", str(path), part_size=1024 * 1024)
    parts = [data[i : i + 1024 * 1024] for i in range(0, len(data), 1024 * 1024)]
    expected = base64.b64encode(hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).digest()).decode()
    assert answer.headers["opc-multipart-md5"] == f"{expected}-{len(parts)}"
    got = osc.get_object("emulator", bucket, "exports/big.bin")
    assert got.data.content == data
    assert got.headers["opc-multipart-md5"] == answer.headers["opc-multipart-md5"]
    assert "content-md5" not in got.headers and "opc-content-md5" not in got.headers
    middle = osc.get_object("emulator", bucket, "exports/big.bin", range="bytes=1048570-1048580")
    assert middle.data.content == data[1048570:1048581]  # across the first two parts
    assert osc.list_multipart_uploads("emulator", bucket).data == []
    with path.open("rb") as source:
        streamed = manager.upload_stream("emulator", bucket, "exports/stream.bin", source, part_size=2 << 20)
    assert streamed.headers["opc-multipart-md5"].endswith("-3")
    assert osc.get_object("emulator", bucket, "exports/stream.bin").data.content == data


def test_multipart_by_hand(osc, bucket):
    made = osc.create_multipart_upload("emulator", bucket, M.CreateMultipartUploadDetails(object="m"))
    upload = made.data.upload_id
    assert (made.data.object, made.data.bucket, made.data.namespace) == ("m", bucket, "emulator")
    etags = {}
    for num, chunk in ((3, b"ccc"), (1, b"aaa"), (2, b"bbb"), (4, b"unused")):
        answer = osc.upload_part("emulator", bucket, "m", upload, num, chunk, content_md5=md5_b64(chunk))
        assert answer.headers["opc-content-md5"] == md5_b64(chunk)
        etags[num] = answer.headers["etag"]
    assert [u.upload_id for u in osc.list_multipart_uploads("emulator", bucket).data] == [upload]
    parts = osc.list_multipart_upload_parts("emulator", bucket, "m", upload, limit=3)
    assert [p.part_number for p in parts.data] == [1, 2, 3] and parts.headers["opc-next-page"] == "3"
    bad_num = refused(lambda: osc.upload_part("emulator", bucket, "m", upload, 10_001, b"x"))
    assert (bad_num.status, bad_num.code) == (400, "InvalidUploadPartNumber")
    unknown = refused(lambda: osc.upload_part("emulator", bucket, "m", "no-such-upload", 1, b"x"))
    assert (unknown.status, unknown.code) == (404, "UploadNotFound")

    def commit(parts):
        details = M.CommitMultipartUploadDetails(
            parts_to_commit=[M.CommitMultipartUploadPartDetails(part_num=n, etag=e) for n, e in parts]
        )
        return osc.commit_multipart_upload("emulator", bucket, "m", upload, details)

    wrong = refused(lambda: commit([(1, etags[1]), (2, "stale")]))
    assert (wrong.status, wrong.code) == (400, "InvalidUploadPart")
    done = commit([(2, etags[2]), (1, etags[1]), (3, etags[3])])  # in part-number order, whatever the list's
    assert done.headers["opc-multipart-md5"].endswith("-3")
    assert osc.get_object("emulator", bucket, "m").data.content == b"aaabbbccc"
    assert osc.list_multipart_uploads("emulator", bucket).data == []
    assert refused(lambda: commit([(1, etags[1])])).code == "UploadNotFound"

    aborted = osc.create_multipart_upload("emulator", bucket, M.CreateMultipartUploadDetails(object="gone")).data
    osc.upload_part("emulator", bucket, "gone", aborted.upload_id, 1, b"x")
    assert osc.abort_multipart_upload("emulator", bucket, "gone", aborted.upload_id).status == 204
    assert refused(lambda: osc.head_object("emulator", bucket, "gone")).status == 404
    assert osc.list_multipart_uploads("emulator", bucket).data == []


def test_if_none_match_given_when_an_upload_starts_holds_at_its_commit(osc, bucket):
    """A manifest written as a multipart upload keeps its write-once condition until the commit."""
    details = M.CreateMultipartUploadDetails(object="manifest.json")
    upload = osc.create_multipart_upload("emulator", bucket, details, if_none_match="*").data.upload_id
    etag = osc.upload_part("emulator", bucket, "manifest.json", upload, 1, b"mine").headers["etag"]
    osc.put_object("emulator", bucket, "manifest.json", b"someone else's")  # wins the race
    parts = M.CommitMultipartUploadDetails(parts_to_commit=[M.CommitMultipartUploadPartDetails(part_num=1, etag=etag)])
    error = refused(lambda: osc.commit_multipart_upload("emulator", bucket, "manifest.json", upload, parts))
    assert (error.status, error.code) == (412, "IfNoneMatchFailed")
    assert osc.get_object("emulator", bucket, "manifest.json").data.content == b"someone else's"
    late = refused(lambda: osc.create_multipart_upload("emulator", bucket, details, if_none_match="*"))
    assert late.code == "IfNoneMatchFailed"


def test_unknown_namespace_bucket_and_object(osc, bucket):
    no_ns = refused(lambda: osc.get_bucket("not-ours", bucket))
    assert (no_ns.status, no_ns.code) == (404, "NamespaceNotFound")
    assert refused(lambda: osc.put_object("not-ours", bucket, "x", b"x")).code == "NamespaceNotFound"
    assert refused(lambda: osc.list_objects("not-ours", bucket)).code == "NamespaceNotFound"
    no_bucket = refused(lambda: osc.put_object("emulator", "nope", "x", b"x"))
    assert (no_bucket.status, no_bucket.code) == (404, "BucketNotFound")
    assert "nope" in no_bucket.message and no_bucket.request_id
    assert refused(lambda: osc.list_objects("emulator", "nope")).code == "BucketNotFound"
    assert refused(lambda: osc.get_bucket("emulator", "nope")).code == "BucketNotFound"
    assert refused(lambda: osc.head_bucket("emulator", "nope")).status == 404
    no_object = refused(lambda: osc.get_object("emulator", bucket, "missing"))
    assert (no_object.status, no_object.code) == (404, "ObjectNotFound")
    assert refused(lambda: osc.head_object("emulator", bucket, "missing")).status == 404
    assert refused(lambda: osc.delete_object("emulator", bucket, "missing")).code == "ObjectNotFound"
    too_long = refused(lambda: osc.put_object("emulator", bucket, "x" * 1025, b"x"))
    assert (too_long.status, too_long.code) == (400, "InvalidObjectName")
