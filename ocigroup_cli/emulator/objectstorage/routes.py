"""HTTP routes of Object Storage (every path under `/n`, on the same address as Streaming): parse a request, call
the operation, serialise the answer. No socket code and no service rules here.

Every request is verified as the service verifies it: PutObject and UploadPart are signed without the body
headers (the SDK passes `enforce_content_headers=False` for exactly those two), every other POST and PUT signs
its body. Their bodies may be as large as MAX_OBJECT_BODY; any other body as large as the Streaming API's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ocigroup_cli.emulator.objectstorage import buckets, listing, multipart, objects, retention
from ocigroup_cli.emulator.objectstorage.objects import Conditions
from ocigroup_cli.emulator.objectstorage.storage import ObjectStorage
from ocigroup_cli.emulator.shared.access import Access, Principal, not_authorized_or_exists
from ocigroup_cli.emulator.shared.auth import Verifier
from ocigroup_cli.emulator.shared.errors import ServiceError, bucket_not_found, limit_exceeded, not_found
from ocigroup_cli.emulator.shared.wire import Response, json_body

Headers = Callable[[str], list[str]]
NO_USER = "ocid1.user.oc1..emulator"  # createdBy of a bucket made by an unsigned request (--no-auth)
# (what the path names, whether it names one of them, method) -> the API operation, for IAM
OPERATIONS = {
    ("b", False, "GET"): "GetBucket",
    ("b", False, "HEAD"): "HeadBucket",
    ("b", False, "POST"): "UpdateBucket",
    ("b", False, "DELETE"): "DeleteBucket",
    ("o", False, "GET"): "ListObjects",
    ("o", True, "GET"): "GetObject",
    ("o", True, "HEAD"): "HeadObject",
    ("o", True, "PUT"): "PutObject",
    ("o", True, "DELETE"): "DeleteObject",
    ("u", False, "POST"): "CreateMultipartUpload",
    ("u", False, "GET"): "ListMultipartUploads",
    ("u", True, "PUT"): "UploadPart",
    ("u", True, "POST"): "CommitMultipartUpload",
    ("u", True, "DELETE"): "AbortMultipartUpload",
    ("u", True, "GET"): "ListMultipartUploadParts",
    ("retentionRules", False, "POST"): "CreateRetentionRule",
    ("retentionRules", False, "GET"): "ListRetentionRules",
    ("retentionRules", True, "GET"): "GetRetentionRule",
    ("retentionRules", True, "PUT"): "UpdateRetentionRule",
    ("retentionRules", True, "DELETE"): "DeleteRetentionRule",
    ("replicationPolicies", False, "GET"): "ListReplicationPolicies",
    ("p", False, "GET"): "ListPreauthenticatedRequests",
}


class StorageRoutes:
    def __init__(
        self, space: ObjectStorage, verifier: Verifier | None, max_json_body: int, access: Access | None = None
    ) -> None:
        self.space = space
        self.verifier = verifier
        self.max_json_body = max_json_body
        self.access = access

    def handle(self, method: str, target: str, headers: Headers, body: bytes, names: list[str]) -> Response:
        split = urlsplit(target)
        parts = split.path.split("/", 6)  # "", "n", namespace, "b", bucket, o|u|retentionRules, rest
        data = method == "PUT" and len(parts) == 7 and parts[5] in ("o", "u")  # PutObject, UploadPart
        who = None if self.verifier is None else self.verifier.verify(method, target, headers, body, data)
        if not data and len(body) > self.max_json_body:
            raise limit_exceeded(f"The request body is larger than {self.max_json_body} bytes.")
        request = _Request(method, split.path, [unquote(p) for p in parts], dict(parse_qsl(split.query)), body)
        request.headers, request.names = headers, names
        if self.access is not None:
            self._authorize(who, request)
        response = self._route(request)
        given = headers("opc-client-request-id")
        if given:
            response.headers["opc-client-request-id"] = given[0]
        return response

    def _authorize(self, who: Principal | None, r: _Request) -> None:
        """IAM: a bucket's calls refused with its BucketNotFound (the answer to an object call on a bucket that
        exists is not confirmed by Oracle: assumed the same), a create with 409, a list with 404."""
        assert self.access is not None
        p = r.parts
        if len(p) < 4 or p[3] != "b":
            return  # GetNamespace needs no permission
        if len(p) == 4:
            where = r.query.get("compartmentId")
            if r.method == "POST":
                data = json_body(r.body)
                where = data.get("compartmentId") if isinstance(data, dict) else None
            where = where if isinstance(where, str) else None  # none given: the operation's own 400
            create = r.method == "POST"
            listed = "CreateBucket" if create else "ListBuckets"
            self.access.check(who, listed, where, {}, not_authorized_or_exists if create else not_found)
            return
        named = len(p) == 7
        operation = OPERATIONS.get((p[5] if len(p) > 5 else "b", named, r.method))
        if operation is None:
            return  # not an API: the route answers so
        namespace, bucket = p[2], p[4]
        compartment, there = self.space.compartment_of(namespace, bucket, p[6] if named and p[5] == "o" else None)
        if operation == "PutObject" and there:
            operation = "OverwriteObject"
        variables = {"target.bucket.name": bucket}
        if named and p[5] in ("o", "u"):
            variables["target.object.name"] = p[6]
        self.access.check(who, operation, compartment, variables, lambda: bucket_not_found(namespace, bucket))

    def _route(self, r: _Request) -> Response:
        p = r.parts
        if len(p) == 2 or (len(p) == 3 and not p[2]):  # GET /n, GET /n/: the tenancy's namespace
            r.allow("GET")
            return _json(self.space.namespace)
        if len(p) < 4 or p[3] != "b":
            raise r.no_api()
        if len(p) == 4:
            return self._buckets(r)
        if len(p) == 5:
            return self._bucket(r)
        if p[5] == "o":
            return self._objects(r) if len(p) == 6 else self._object(r)
        if p[5] == "u":
            return self._uploads(r) if len(p) == 6 else self._upload(r)
        if p[5] == "retentionRules":
            return self._rules(r) if len(p) == 6 else self._rule(r)
        if p[5] in ("replicationPolicies", "p") and len(p) == 6:  # none here: `oci os bucket delete --empty` asks
            r.allow("GET")
            retention.list_rules(self.space, p[2], p[4])  # the bucket must be there
            return _json([])
        raise r.no_api()

    def _buckets(self, r: _Request) -> Response:
        namespace = r.parts[2]
        if r.method == "POST":
            row = buckets.create_bucket(self.space, namespace, json_body(r.body), r.user())
            return _json(buckets.bucket_json(self.space, row), {"etag": row.etag})
        r.allow("GET")
        items, following = buckets.list_buckets(self.space, namespace, r.query)
        return _json(items, {"opc-next-page": following} if following else {})

    def _bucket(self, r: _Request) -> Response:
        namespace, name = r.parts[2], r.parts[4]
        if r.method == "DELETE":
            buckets.delete_bucket(self.space, namespace, name)
            return Response(204)
        r.allow("GET", "HEAD")
        found = buckets.get_bucket(self.space, namespace, name, r.query.get("fields"))
        return (
            _json(found, {"etag": found["etag"]}) if r.method == "GET" else Response(200, b"", {"etag": found["etag"]})
        )

    def _objects(self, r: _Request) -> Response:
        r.allow("GET")
        return _json(listing.list_objects(self.space, r.parts[2], r.parts[4], r.query))

    def _object(self, r: _Request) -> Response:
        namespace, bucket, name = r.parts[2], r.parts[4], r.parts[6]
        if r.method == "PUT":
            return Response(200, b"", objects.put_object(self.space, namespace, bucket, name, r.body, r.given()))
        if r.method == "DELETE":
            objects.delete_object(self.space, namespace, bucket, name, r.header("if-match"))
            return Response(204)
        r.allow("GET", "HEAD")
        objects.check_name(name)
        get = r.method == "GET"
        read = objects.read_object(self.space, namespace, bucket, name, r.conditions(), r.header("range"), get)
        return Response(read.status, b"", read.headers, stream=read.file, length=read.length)

    def _uploads(self, r: _Request) -> Response:
        namespace, bucket = r.parts[2], r.parts[4]
        if r.method == "POST":
            upload = multipart.create_upload(self.space, namespace, bucket, json_body(r.body), r.conditions())
            return _json(upload.json(namespace))
        r.allow("GET")
        items, following = multipart.list_uploads(self.space, namespace, bucket, r.query)
        return _json(items, {"opc-next-page": following} if following else {})

    def _upload(self, r: _Request) -> Response:
        upload_id = r.query.get("uploadId")
        if not upload_id:
            raise ServiceError(400, "MissingUploadId", "The 'uploadId' query parameter is required.")
        where = (r.parts[2], r.parts[4], r.parts[6], upload_id)
        if r.method == "PUT":
            num = multipart.part_number(r.query.get("uploadPartNum"))
            return Response(200, b"", multipart.upload_part(self.space, where, num, r.body, r.header("content-md5")))
        if r.method == "POST":
            return Response(200, b"", multipart.commit_upload(self.space, where, json_body(r.body), r.conditions()))
        if r.method == "DELETE":
            multipart.abort_upload(self.space, where)
            return Response(204)
        r.allow("GET")
        items, following = multipart.list_parts(self.space, where, r.query)
        return _json(items, {"opc-next-page": following} if following else {})

    def _rules(self, r: _Request) -> Response:
        namespace, bucket = r.parts[2], r.parts[4]
        if r.method == "POST":
            rule = retention.create_rule(self.space, namespace, bucket, json_body(r.body))
            return _json(rule.json(), {"etag": rule.etag})
        r.allow("GET")
        return _json({"items": [rule.json() for rule in retention.list_rules(self.space, namespace, bucket)]})

    def _rule(self, r: _Request) -> Response:
        namespace, bucket, rule_id = r.parts[2], r.parts[4], r.parts[6]
        if r.method == "DELETE":
            retention.delete_rule(self.space, namespace, bucket, rule_id)
            return Response(204)
        r.allow("GET")
        rule = retention.get_rule(self.space, namespace, bucket, rule_id)
        return _json(rule.json(), {"etag": rule.etag})


class _Request:
    """One request, taken apart: `parts` is the path's segments, unquoted (the last holds an object's whole name)."""

    headers: Headers
    names: list[str]

    def __init__(self, method: str, path: str, parts: list[str], query: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.parts, self.query, self.body = method, path, parts, query, body

    def header(self, name: str) -> str | None:
        values = self.headers(name)
        return values[0] if values else None

    def conditions(self) -> Conditions:
        return Conditions(self.header("if-match"), self.header("if-none-match"))

    def given(self) -> dict[str, str | None]:
        """What PutObject reads from the headers: conditions, Content-MD5, and what the object keeps."""
        wanted = {"if-match", "if-none-match", "content-md5", *objects.KEPT_HEADERS}
        wanted |= {n.lower() for n in self.names if n.lower().startswith("opc-meta-")}
        return {name: self.header(name) for name in wanted}

    def user(self) -> str:
        """The user OCID of the signing key (`keyId` is tenancy/user/fingerprint), as a bucket's createdBy."""
        auth = self.header("authorization") or ""
        key_id = auth.split('keyId="', 1)[1].split('"', 1)[0] if 'keyId="' in auth else ""
        fields = key_id.split("/")
        return fields[1] if len(fields) == 3 and fields[1] else NO_USER

    def allow(self, *methods: str) -> None:
        if self.method not in methods:
            raise ServiceError(405, "MethodNotAllowed", f"{self.method} is not allowed on {self.path}")

    def no_api(self) -> ServiceError:
        return ServiceError(404, "NotFound", f"No such API: {self.method} {self.path}")


def _json(data: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(200, json.dumps(data).encode(), dict(headers or {}))
