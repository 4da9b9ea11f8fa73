"""Resource types, the permissions each verb grants on them, and the permissions each API call needs.

From Oracle's policy references for Streaming, Object Storage and Monitoring (docs/iam.md has the pages). Access
is cumulative (inspect < read < use < manage). Rows marked "assumed" are not stated by Oracle."""

from __future__ import annotations

from dataclasses import dataclass

VERBS = ("inspect", "read", "use", "manage")

# resource type -> the permissions each verb adds to the one below it
LADDERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "streams": (
        ("STREAM_INSPECT",),
        ("STREAM_READ",),
        ("STREAM_UPDATE", "STREAM_MOVE", "STREAM_PRODUCE", "STREAM_CONSUME"),
        ("STREAM_CREATE", "STREAM_DELETE"),
    ),
    "stream-pull": ((), (), ("STREAM_CONSUME",), ()),
    "stream-push": ((), (), ("STREAM_PRODUCE",), ()),
    "stream-pools": (
        ("STREAM_POOL_INSPECT",),
        ("STREAM_POOL_READ",),
        ("STREAM_POOL_UPDATE", "STREAM_POOL_MOVE"),
        ("STREAM_POOL_CREATE", "STREAM_POOL_DELETE"),
    ),
    "connect-harness": (  # assumed names: the emulator serves no Kafka Connect harness
        ("CONNECT_HARNESS_INSPECT",),
        ("CONNECT_HARNESS_READ",),
        ("CONNECT_HARNESS_UPDATE", "CONNECT_HARNESS_MOVE"),
        ("CONNECT_HARNESS_CREATE", "CONNECT_HARNESS_DELETE"),
    ),
    "objectstorage-namespaces": (("OBJECTSTORAGE_NAMESPACE_READ",), (), (), ("OBJECTSTORAGE_NAMESPACE_UPDATE",)),
    "buckets": (
        ("BUCKET_INSPECT",),
        ("BUCKET_READ",),
        ("BUCKET_UPDATE",),
        ("BUCKET_CREATE", "BUCKET_DELETE", "PAR_MANAGE", "RETENTION_RULE_MANAGE", "RETENTION_RULE_LOCK"),
    ),
    "objects": (
        ("OBJECT_INSPECT",),
        ("OBJECT_READ",),
        ("OBJECT_OVERWRITE",),
        ("OBJECT_CREATE", "OBJECT_DELETE", "OBJECT_RESTORE", "OBJECT_VERSION_DELETE"),
    ),
    "metrics": (("METRIC_INSPECT",), ("METRIC_READ",), ("METRIC_WRITE",), ()),
}
FAMILIES = {
    "stream-family": ("streams", "stream-pull", "stream-push", "stream-pools", "connect-harness"),
    "object-family": ("objectstorage-namespaces", "buckets", "objects"),
}
RESOURCE_TYPES = (*LADDERS, *FAMILIES, "all-resources")


def granted(verb: str, resource_type: str) -> frozenset[str]:
    """Every permission `verb resource_type` grants (a family: its members', all-resources: every type's)."""
    if resource_type == "all-resources":
        members: tuple[str, ...] = tuple(LADDERS)
    else:
        members = FAMILIES.get(resource_type, (resource_type,))
    upto = VERBS.index(verb) + 1
    return frozenset(p for member in members for step in LADDERS[member][:upto] for p in step)


@dataclass(frozen=True)
class Need:
    """What a call needs: every permission in `all_of`, or (`any_of`) one of them."""

    permissions: tuple[str, ...]
    any_of: bool = False


STREAM_CONSUME = Need(("STREAM_CONSUME",))
OPERATIONS: dict[str, Need] = {
    "ListStreams": Need(("STREAM_INSPECT",)),
    "GetStream": Need(("STREAM_READ",)),
    "CreateStream": Need(("STREAM_CREATE",)),
    "DeleteStream": Need(("STREAM_DELETE",)),
    "UpdateStream": Need(("STREAM_UPDATE",)),
    "PutMessages": Need(("STREAM_PRODUCE",)),
    **dict.fromkeys(
        (
            "GetMessages",
            "CreateCursor",
            "CreateGroupCursor",
            "GetGroup",
            "UpdateGroup",
            "ConsumerHeartbeat",
            "ConsumerCommit",
        ),
        STREAM_CONSUME,
    ),
    "GetNamespace": Need(()),
    "ListBuckets": Need(("BUCKET_INSPECT",)),
    "CreateBucket": Need(("BUCKET_CREATE",)),
    "GetBucket": Need(("BUCKET_READ",)),
    "HeadBucket": Need(("BUCKET_READ",)),
    "UpdateBucket": Need(("BUCKET_UPDATE",)),
    "DeleteBucket": Need(("BUCKET_DELETE",)),
    "ListRetentionRules": Need(("BUCKET_READ",)),
    "ListReplicationPolicies": Need(("BUCKET_READ",)),  # these two are not in the reference: the emulator's choice
    "ListPreauthenticatedRequests": Need(("PAR_MANAGE",)),
    "GetRetentionRule": Need(("BUCKET_READ",)),
    "CreateRetentionRule": Need(("RETENTION_RULE_MANAGE",)),
    "UpdateRetentionRule": Need(("RETENTION_RULE_MANAGE",)),
    "DeleteRetentionRule": Need(("RETENTION_RULE_MANAGE",)),
    "ListObjects": Need(("OBJECT_INSPECT",)),
    "HeadObject": Need(("OBJECT_READ", "OBJECT_INSPECT"), any_of=True),
    "GetObject": Need(("OBJECT_READ",)),
    "PutObject": Need(("OBJECT_CREATE",)),  # a new name; over an existing one: OverwriteObject
    "OverwriteObject": Need(("OBJECT_OVERWRITE",)),  # PutObject over an existing name (not an API name)
    "DeleteObject": Need(("OBJECT_DELETE",)),
    "CreateMultipartUpload": Need(("OBJECT_CREATE", "OBJECT_OVERWRITE")),
    "UploadPart": Need(("OBJECT_CREATE", "OBJECT_OVERWRITE")),
    "CommitMultipartUpload": Need(("BUCKET_READ", "OBJECT_CREATE", "OBJECT_READ", "OBJECT_OVERWRITE")),
    "AbortMultipartUpload": Need(("OBJECT_DELETE",)),
    "ListMultipartUploads": Need(("OBJECT_INSPECT",)),  # assumed
    "ListMultipartUploadParts": Need(("OBJECT_INSPECT",)),  # assumed
    "PostMetricData": Need(("METRIC_WRITE",)),
}

# the narrowest `verb resource-type` granting each permission a command of ocigroup needs
NARROWEST: dict[str, tuple[str, str]] = {
    "STREAM_INSPECT": ("inspect", "streams"),
    "STREAM_READ": ("read", "streams"),
    "STREAM_CONSUME": ("use", "stream-pull"),
    "STREAM_PRODUCE": ("use", "stream-push"),
    "STREAM_CREATE": ("manage", "streams"),
    "BUCKET_INSPECT": ("inspect", "buckets"),
    "BUCKET_READ": ("read", "buckets"),
    "RETENTION_RULE_MANAGE": ("manage", "buckets"),
    "OBJECT_INSPECT": ("inspect", "objects"),
    "OBJECT_READ": ("read", "objects"),
    "OBJECT_OVERWRITE": ("use", "objects"),
    "OBJECT_CREATE": ("manage", "objects"),
    "OBJECT_DELETE": ("manage", "objects"),
    "METRIC_WRITE": ("use", "metrics"),
}


def grant_of(permission: str) -> str:
    """`use stream-pull`: the narrowest verb and resource type that grant `permission`."""
    verb, resource_type = NARROWEST[permission]
    return f"{verb} {resource_type}"


def grants_for(operation: str) -> list[str]:
    """The narrowest grants `operation` needs, in order, without repeats (`read buckets`, `manage objects`)."""
    need = OPERATIONS.get(operation)
    if need is None:
        return []
    pairs = [NARROWEST[p] for p in need.permissions if p in NARROWEST]
    if need.any_of:
        pairs = pairs[-1:]  # the lesser of the alternatives (HeadObject: inspect objects)
    highest: dict[str, str] = {}  # per resource type, the highest verb (manage objects covers read objects)
    for verb, resource_type in pairs:
        if VERBS.index(verb) >= VERBS.index(highest.get(resource_type, "inspect")):
            highest[resource_type] = verb
    return [f"{verb} {resource_type}" for resource_type, verb in highest.items()]
