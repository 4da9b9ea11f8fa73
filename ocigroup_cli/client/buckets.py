"""The Object Storage calls the local profile's first use makes (the tenancy's namespace, CreateBucket and
CreateRetentionRule) and those `ocigroup doctor` probes a bucket with.

Object Storage's paths have no version prefix (`/n/...`); it answers on the profile's endpoint when one is set
(the bundled emulator serves it beside Streaming), else on the region's Object Storage endpoint. Signed, paced
and retried like every other request (client/sender.py).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ocigroup_cli.client.regions import object_storage_endpoint
from ocigroup_cli.client.sender import Sender
from ocigroup_cli.errors import Conflict


class BucketClient(Sender):
    API_VERSION = ""

    @property
    def storage_url(self) -> str:
        return str(self.profile.settings.endpoint or object_storage_endpoint(self.creds.region))

    def namespace(self) -> str:
        resp = self.request("GetNamespace", self.storage_url, "GET", "/n")
        return resp.shaped(_name)

    def create_bucket(self, name: str, compartment: str) -> bool:
        """CreateBucket in the tenancy's namespace; False when a bucket of that name exists already."""
        path = f"/n/{quote(self.namespace(), safe='')}/b"
        body = {"name": name, "compartmentId": compartment}
        try:
            self.request("CreateBucket", self.storage_url, "POST", path, body=body, retry=False)
        except Conflict as exc:
            if "BucketAlreadyExists" not in exc.message:
                raise
            return False
        return True

    def create_retention_rule(self, bucket: str, name: str, days: int) -> None:
        """CreateRetentionRule: objects of `bucket` kept `days` days, the rule not locked (it can be removed)."""
        path = f"/n/{quote(self.namespace(), safe='')}/b/{quote(bucket, safe='')}/retentionRules"
        body = {"displayName": name, "duration": {"timeAmount": days, "timeUnit": "DAYS"}}
        self.request("CreateRetentionRule", self.storage_url, "POST", path, body=body, retry=False)

    # -- read-only probes (ocigroup doctor), and its probe object -------------------------------------------------

    def _bucket_path(self, namespace: str, bucket: str) -> str:
        return f"/n/{quote(namespace, safe='')}/b/{quote(bucket, safe='')}"

    def get_bucket(self, namespace: str, bucket: str) -> dict[str, Any]:
        doc = self.request("GetBucket", self.storage_url, "GET", self._bucket_path(namespace, bucket)).json()
        return doc if isinstance(doc, dict) else {}

    def list_retention_rules(self, namespace: str, bucket: str) -> None:
        path = self._bucket_path(namespace, bucket) + "/retentionRules"
        self.request("ListRetentionRules", self.storage_url, "GET", path)

    def list_objects(self, namespace: str, bucket: str) -> None:
        path = self._bucket_path(namespace, bucket) + "/o"
        self.request("ListObjects", self.storage_url, "GET", path, {"limit": 1})

    def put_text(self, namespace: str, bucket: str, name: str, text: str) -> None:
        path = f"{self._bucket_path(namespace, bucket)}/o/{quote(name, safe='')}"
        self.request("PutObject", self.storage_url, "PUT", path, body=text, sign_body=False, retry=False)

    def delete_object(self, namespace: str, bucket: str, name: str) -> None:
        path = f"{self._bucket_path(namespace, bucket)}/o/{quote(name, safe='')}"
        self.request("DeleteObject", self.storage_url, "DELETE", path, retry=False)


def _name(doc: object) -> str:
    if not isinstance(doc, str) or not doc:
        raise TypeError("not a namespace name")
    return doc
