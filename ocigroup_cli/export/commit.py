"""The driver's side of an export to Object Storage (`--out oci://BUCKET@NAMESPACE/PREFIX`): its commit protocol.

- Before any work: the bucket must be there, the prefix must hold no export (its manifest is the export: never
  overwritten), objects an unfinished run left under the prefix are removed (or named with the rule that keeps
  them, when a retention rule forbids it), and with `--require-retention` the bucket must have a retention rule
  (at least `--retention-at-least` long).
- The tasks upload the data objects (export/objects.py). Then the listing must show exactly the objects the tasks
  read back, of the same sizes and MD5s, and the manifest is written last, only if no object has its name
  (`if-none-match: *`): that write is the commit. A prefix without a manifest is an unfinished export.
- A failed or interrupted run removes the objects it wrote, where it still can; a run killed with -9 leaves them
  to the next run to the prefix (its claim, on a stand-in path in the state directory, tells a live run from a
  dead one on this machine, and names its Spark job to stop).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocigroup_cli.client.objects import ObjectStore
from ocigroup_cli.config import LOCAL_SOURCE, Profile
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.retention import Protection, parse_days, protection, shortfall
from ocigroup_cli.errors import (
    Interrupted,
    NotFound,
    OcigroupError,
    PreconditionFailed,
    ServiceError,
    TransientError,
    UsageError,
)
from ocigroup_cli.export import manifest, progress
from ocigroup_cli.export.claim import Claim
from ocigroup_cli.export.location import MANIFEST_OBJECT, BucketPrefix, parse_bucket
from ocigroup_cli.export.plan import Plan
from ocigroup_cli.paths import private_dirs, state_dir


@dataclass(frozen=True)
class Requirement:
    """--require-retention and --retention-at-least (profile export.require_retention, export.retention_at_least)."""

    retention: bool = False
    at_least: str | None = None

    @property
    def at_least_days(self) -> float | None:
        return None if self.at_least is None else parse_days(self.at_least)


def stand_in(where: BucketPrefix) -> Path:
    """The local path a run to `where` claims (its lock, progress and partial directory): one per prefix."""
    key = hashlib.sha256(where.uri.encode()).hexdigest()[:16]
    folder = state_dir() / "exports"
    private_dirs(folder)
    return folder / key


def check(
    store: ObjectStore, where: BucketPrefix, require: Requirement, now_ms: int, own: str | None = None
) -> Protection | None:
    """What is refused before any work (see the module's docstring); the retention rule that will protect it.
    `own`: the compartment where the local profile's own bucket is made if it is missing (an emulator's state
    from before it had one)."""
    try:
        store.check_bucket()
    except NotFound:
        if own is not None:
            store.create_bucket(own)
            return check(store, where, require, now_ms)
        missing = f"--out {where.uri}: no bucket {where.bucket!r} in namespace {store.namespace!r} (or no permission)."
        raise UsageError(missing, "create it, or check the name and the namespace") from None
    _own_prefix(where, [o.name for o in store.listing(where.prefix + "/")])
    inside = next((m for m in where.above if store.head(m) is not None and manifest.is_ours(_text(store, m))), None)
    if inside is not None:  # its verify would find this one's objects extra, for good under a retention rule
        raise UsageError(f"--out {where.uri} is inside the export at {inside.removesuffix('/' + MANIFEST_OBJECT)}: "
                         "an export is never changed.", "choose a prefix outside it")  # fmt: skip
    rules = protection(store.retention_rules(), now_ms)
    if require.retention and (problem := shortfall(rules, require.at_least_days)):
        fix = "add a retention rule to the bucket (oci os retention-rule create), or use another bucket"
        raise UsageError(f"--require-retention: bucket {where.bucket!r}: {problem}.", fix)
    return rules


SETTLE_S = 2.0  # a killed run's last uploads land within this (its job was interrupted when its claim was swept)
SETTLE_MAX_S = 30.0


def clear(store: ObjectStore, where: BucketPrefix, clock: Clock) -> None:
    """Remove what an unfinished run left under the prefix (no live run of this machine writes there: the caller
    holds the prefix's claim), once nothing lands there any more, or say what is in the way."""
    found = _settled(store, where, clock)
    _own_prefix(where, found)
    left = remove(store, found)
    if left:
        raise UsageError(
            f"--out {where.uri}: {len(left)} object(s) of an unfinished export are in the way, and cannot be "
            f"removed ({left[0]}).",
            "export to another prefix; they can be removed once the bucket's retention rule allows",
        )


def _text(store: ObjectStore, name: str) -> str:
    try:
        return store.get_bytes(name).decode("utf-8", "replace")
    except NotFound:
        return ""


def _own_prefix(where: BucketPrefix, found: list[str]) -> None:
    """The prefix must hold no export, and nothing but what an unfinished export to it leaves."""
    if where.manifest in found:
        raise UsageError(f"--out {where.uri} already holds an export ({MANIFEST_OBJECT}); an export is never "
                         "overwritten.", "choose another prefix")  # fmt: skip
    foreign = [name for name in found if not where.is_export_file(name)]
    if foreign:
        raise UsageError(f"--out {where.uri}: the prefix holds objects that are not an export's ({foreign[0]}); an "
                         "export needs a prefix of its own.", "choose another prefix")  # fmt: skip


def _settled(store: ObjectStore, where: BucketPrefix, clock: Clock) -> list[str]:
    """The objects under the prefix, once the listing stayed the same for SETTLE_S (at most SETTLE_MAX_S): a killed
    run's tasks may still have had an upload in hand. An empty prefix is settled at once."""
    began = clock.monotonic()
    seen = [(o.name, o.size) for o in store.listing(where.prefix + "/")]
    while seen and clock.monotonic() - began < SETTLE_MAX_S:
        clock.sleep(SETTLE_S)
        now = [(o.name, o.size) for o in store.listing(where.prefix + "/")]
        if now == seen:
            break
        seen = now
    return [name for name, _ in seen]


def remove(store: ObjectStore, names: list[str]) -> list[str]:
    """Delete `names` where the bucket allows it; what could not be deleted, each with why."""
    left = []
    for name in names:
        try:
            store.delete(name)
        except NotFound:
            continue
        except TransientError:  # the service failing is not an object in the way: worth a retry (exit 4)
            raise
        except ServiceError as exc:  # 409: a retention rule keeps it; 401/403: no permission to delete
            left.append(f"{name}: {exc.message}")
    return left


def commit(
    store: ObjectStore, where: BucketPrefix, written: list[manifest.FileStats], build: Any, kept: Protection | None
) -> dict[str, Any]:
    """Check the objects against what the tasks read back, then write the manifest (`build(files, digest)`) last,
    only if no object has its name; the manifest."""
    from ocigroup_cli.export.job import consistent

    names = {where.object(f.name): f.name for f in written}
    listed = [o for o in store.listing(where.prefix + "/") if o.name != where.manifest]
    strays = [o.name for o in listed if o.name not in names and where.is_export_file(o.name)]  # a killed run's late
    if strays and not remove(store, strays):  # uploads (ours is the claim); anything else stays, and is named
        listed = [o for o in listed if o.name in names]
    present = {names.get(o.name, o.name.removeprefix(where.prefix + "/")): o.size for o in listed}
    md5 = {names.get(o.name, o.name.removeprefix(where.prefix + "/")): o.md5 for o in listed}
    files = consistent(written, present, md5)
    doc: dict[str, Any] = build(files, manifest.combine(None, "", files))
    doc["destination"] = {"uri": where.uri, "retention": None if kept is None else kept.to_json()}
    try:
        store.put_bytes(where.manifest, (json.dumps(doc, indent=2) + "\n").encode())
    except PreconditionFailed:
        raise OcigroupError(f"--out {where.uri}: another export committed its manifest to this prefix meanwhile; "
                            "this one's objects are left beside it.") from None  # fmt: skip
    return doc


@dataclass(frozen=True)
class BucketTarget:
    """An export's Object Storage prefix (its namespace known), checked before any work (`kept`: the retention
    rule that will protect it)."""

    where: BucketPrefix
    fmt: str
    master: str
    store: ObjectStore
    kept: Protection | None = None

    @property
    def out(self) -> str:
        return self.where.uri

    @property
    def claim_path(self) -> Path:
        return stand_in(self.where)


def run(
    write: Callable[[str], list[manifest.FileStats]] | None,
    plan: Plan,
    target: BucketTarget,
    meta: dict[str, Any],
    clock: Clock,
    log: Path | None,
    mine: Claim,
    read: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Export `plan` to the prefix under the claim `mine` and commit it; on any failure (Ctrl-C included) the
    objects it wrote are removed where they still can be."""
    from ocigroup_cli.export.job import build_manifest, spark_failure

    store, where = target.store, target.where
    others = mine.partial.parent.glob(f"{target.claim_path.name}.partial-*")
    if any(not p.name.startswith(mine.partial.name) for p in others):  # the claim's sweep removed the dead ones
        raise UsageError(f"--out {where.uri}: another export to this prefix is running on this machine.",
                         "wait for it, or export to another prefix")  # fmt: skip
    clear(store, where, clock)
    try:
        written: list[manifest.FileStats] = []
        if plan.slices and write is not None:
            try:
                written = write(where.uri)
            except (OcigroupError, KeyboardInterrupt):
                raise
            except Exception as exc:  # noqa: BLE001 - py4j, Spark Connect and pyspark errors share nothing but text
                raise spark_failure(exc, log) from None
        read()
        return commit(store, where, written, lambda files, digest: build_manifest(
            plan, target.fmt, files, digest, meta, plan.end_ms, clock.time_ms()), target.kept)  # fmt: skip
    except BaseException as exc:
        progress.stop(mine.progress)
        left = _undo(store, where, clock, mine.progress)
        if isinstance(exc, KeyboardInterrupt) and left != []:  # never "nothing was written" with objects left
            what = (f"what it wrote under {where.uri} may be left (it could not be checked)" if left is None
                    else f"{len(left)} object(s) it wrote are left under {where.uri} ({left[0]})")  # fmt: skip
            raise Interrupted(f"export interrupted: {what}; without a manifest they are no export, and the next "
                              "export to the prefix removes them where the bucket allows.") from None  # fmt: skip
        raise


def _undo(store: ObjectStore, where: BucketPrefix, clock: Clock, tasks: Path) -> list[str] | None:
    """Remove what a failed run wrote, once its tasks' last uploads have landed (one in flight when its task was
    cancelled still lands, after a removal that came at once: this machine's tasks mark theirs in `tasks`, a
    cluster's are waited for until the listing settles); what is left, each with why, or None when that is not
    known (the service failed, a second Ctrl-C). A manifest there is another run's commit: its files stay."""
    try:
        began = clock.monotonic()
        while progress.tasks_in_hand(tasks) and clock.monotonic() - began < SETTLE_MAX_S:
            clock.sleep(0.1)
        if store.head(where.manifest) is not None:
            return []
        return remove(store, [name for name in _settled(store, where, clock) if where.is_export_file(name)])
    except (OcigroupError, KeyboardInterrupt):
        return None


def target_for(profile: Profile, out: str, now_ms: int) -> BucketTarget:
    """`--out oci://…` checked before any work: its namespace the tenancy's, and what `check` refuses."""
    where = parse_bucket(out)
    store = ObjectStore(profile, where.bucket)
    if where.namespace is not None and where.namespace != store.namespace:
        raise UsageError(f"--out {out}: namespace {where.namespace!r} is not this tenancy's ({store.namespace!r}).",
                         f"write oci://{where.bucket}@{store.namespace}/{where.prefix}")  # fmt: skip
    where = where.in_namespace(store.namespace)
    settings = profile.settings.export
    require = Requirement(settings.require_retention, settings.retention_at_least)
    own = profile.local and where.bucket == settings.bucket and profile.sources["export.bucket"] == LOCAL_SOURCE
    kept = check(store, where, require, now_ms, profile.settings.stream.compartment if own else None)
    return BucketTarget(where, settings.format, settings.master, store, kept)
