"""The policy statements that grant a missing permission, narrowest first, for a person to paste into a policy.

The group is left as `<your-group>`: which of the user's groups should hold the grant is theirs to decide."""

from __future__ import annotations

from ocigroup_cli.iam.permissions import grant_of

GROUP = "<your-group>"
# the variable that narrows a grant on each permission to one resource (none for a list: it names no target)
NARROWED_BY = {
    "STREAM_READ": "target.stream.id",
    "STREAM_CONSUME": "target.stream.id",
    "STREAM_PRODUCE": "target.stream.id",
    "BUCKET_READ": "target.bucket.name",
    "OBJECT_INSPECT": "target.bucket.name",
    "OBJECT_READ": "target.bucket.name",
    "OBJECT_OVERWRITE": "target.bucket.name",
    "OBJECT_CREATE": "target.bucket.name",
    "OBJECT_DELETE": "target.bucket.name",
    "METRIC_WRITE": "target.metrics.namespace",
}


def statements(permission: str, compartment: str | None, target: str | None = None) -> list[str]:
    """`Allow group <your-group> to use stream-pull in compartment id C where target.stream.id = 'S'`, then the
    same without the condition. Without a compartment: in the tenancy, narrowed by the condition."""
    where = f"in compartment id {compartment}" if compartment else "in tenancy"
    head = f"Allow group {GROUP} to {grant_of(permission)} {where}"
    variable = NARROWED_BY.get(permission)
    if variable is None or not target:
        return [head]
    return [f"{head} where {variable} = '{_quoted(target)}'", head]


def _quoted(value: str) -> str:
    return value.replace("'", "")  # OCIDs and bucket names hold no quote; a hostile one cannot end the condition
