"""`export verify`: recompute a manifest's every claim from the files and list what differs."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocigroup_cli import inputs
from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.errors import NotFound, UsageError
from ocigroup_cli.export import manifest
from ocigroup_cli.export.location import MANIFEST_OBJECT, BucketPrefix, parse_bucket

if TYPE_CHECKING:
    from ocigroup_cli.client.objects import ObjectStore
    from ocigroup_cli.config import Profile

FILE_FIELDS = ("rows", "first_offset", "last_offset", "first_timestamp", "last_timestamp", "bytes", "sha256")


def load(directory: Path) -> dict[str, Any]:
    path = directory / manifest.MANIFEST
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory.", "pass the --out directory of an export")
    try:
        text = inputs.read_text(path, manifest.MAX_MANIFEST_BYTES, "manifest")
    except FileNotFoundError:
        raise UsageError(f"{path}: no manifest; this is not a finished export.") from None
    return checked(text, str(path))


def checked(text: str, where: str) -> dict[str, Any]:
    """A manifest's text as its document, or a UsageError naming what is wrong with it."""
    try:
        doc: dict[str, Any] = inputs.json_of(text)
    except ValueError as exc:
        raise UsageError(f"{where}: not valid JSON ({str(exc)[:200]}).") from None
    wrong = _misshapen(doc) if isinstance(doc, dict) else "not a JSON object"
    if wrong or doc.get("format") not in manifest.EXTENSIONS:
        raise UsageError(f"{where}: not an ocigroup export manifest ({wrong or 'no format it knows'}).")
    if doc.get("manifest_version") not in (1, manifest.VERSION):
        raise UsageError(
            f"{where}: manifest version {doc.get('manifest_version')!r} is not one this ocigroup knows "
            f"(1 to {manifest.VERSION}).",
            "verify it with the ocigroup version that wrote it (the manifest's tool.version)",
        )
    return doc


def _misshapen(doc: dict[str, Any]) -> str | None:
    """What of the manifest's fields verify reads is not of its kind (a hand-edited or hostile file), if any."""
    files, partitions = doc.get("files"), doc.get("partitions", [])
    if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in files):
        return "'files' must be a list of objects with a 'name'"
    if not isinstance(partitions, list) or not all(
        isinstance(p, dict) and _integer(p.get("partition")) and isinstance(p.get("requested") or {}, dict)
        for p in partitions
    ):
        return "'partitions' must be a list of objects with a whole-number 'partition'"
    if not isinstance(doc.get("content_digest", {}), dict) or not isinstance(doc.get("requested") or {}, dict):
        return "'content_digest' and 'requested' must be objects"
    if "rows" in doc and not _integer(doc["rows"]):
        return "'rows' must be a whole number"
    asked = doc.get("requested") or {}
    for name, value in (("fixed_end", doc.get("fixed_end")), ("to_time", asked.get("to_time")),
                        ("from_time", asked.get("from_time"))):  # fmt: skip
        try:
            if value is not None:
                parse_rfc3339_ms(value)
        except (TypeError, ValueError, AttributeError):
            return f"'{name}' must be a time (RFC 3339), not {str(value)[:40]!r}"
    return None


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _differ(what: str, claimed: Any, found: Any) -> str:
    said = "nothing" if claimed is None else repr(claimed)
    shown = "nothing (no readable rows)" if found is None else repr(found)
    return f"{what}: the manifest says {said}, the files show {shown}"


def verify(directory: Path) -> tuple[dict[str, Any], list[str]]:
    """The manifest and the list of differences (empty when every claim holds)."""
    doc = load(directory)
    claimed = {f["name"]: f for f in doc["files"]}
    entries = {p.name: p for p in directory.iterdir()}
    present = entries.keys() - {manifest.MANIFEST}
    problems = [f"missing file: {name}" for name in sorted(claimed.keys() - present)]
    problems += [f"extra file: {name}" for name in sorted(present - claimed.keys())]
    strange = {name: _not_plain(entries[name]) for name in sorted(present | {manifest.MANIFEST} & entries.keys())}
    problems += [f"{name}: {why}" for name, why in strange.items() if why]
    if any(strange.values()):  # what a link points at is not the export: its claims are not checked against it
        return doc, problems
    files, digest = manifest.scan(directory, doc["format"], doc["manifest_version"])
    return doc, problems + compare(doc, files, digest)


def _not_plain(path: Path) -> str | None:
    """Why an entry of an export directory is not one of its files: a symbolic link (to anywhere), not a regular
    file; None for a regular file."""
    if path.is_symlink():
        return "a symbolic link, not a file of the export"
    if not path.is_file():
        return "not a regular file"
    return None


def compare(doc: dict[str, Any], files: list[manifest.FileStats], digest: str) -> list[str]:
    """Every claim of the manifest `doc` against what the files show (their facts, read back, and the content
    digest); the differences."""
    claimed = {f["name"]: f for f in doc["files"]}
    problems: list[str] = []
    for st in files:
        problems += st.problems
        if st.name in claimed:
            found = st.as_json()
            problems += [
                _differ(f"{st.name} {key}", claimed[st.name].get(key), found[key])
                for key in FILE_FIELDS
                if claimed[st.name].get(key) != found[key]
            ]
    readable = [f for f in files if f.name in claimed]
    for entry in doc.get("partitions", []):
        facts = manifest.partition_facts(readable, entry["partition"])
        problems += [
            _differ(f"partition {entry['partition']} {key}", entry.get(key), value)
            for key, value in facts.items()
            if entry.get(key) != value
        ]
    problems += contradictions(doc, readable)
    total = sum(f.rows for f in files)
    if doc.get("rows") != total:
        problems.append(_differ("total rows", doc.get("rows"), total))
    if doc.get("content_digest", {}).get("value") != digest:
        problems.append(_differ("content digest", doc.get("content_digest", {}).get("value"), digest))
    return problems


def contradictions(doc: dict[str, Any], files: list[manifest.FileStats]) -> list[str]:
    """What the manifest says was asked for, against what it lists and the files hold (a manifest rewritten to
    match altered files still has to agree with itself): an entry for every partition asked for (one without rows
    too) and none other, each listed file of the export's format, rows within each partition's offsets asked and
    its --from-time, not after its --to-time or fixed end, and only of the stream named."""
    asked = (doc.get("requested") or {}).get("partitions")
    entries = [e["partition"] for e in doc.get("partitions", [])]
    problems = []
    if isinstance(asked, list):
        problems += [
            f"partition {p}: asked for, but the manifest has no entry for it" for p in asked if p not in entries
        ]
        problems += [f"partition {p}: in the manifest, but not asked for" for p in entries if p not in asked]
    ext = manifest.EXTENSIONS[doc["format"]]
    problems += [
        f"{f['name']}: not a {doc['format']} file of the export" for f in doc["files"] if not f["name"].endswith(ext)
    ]
    for entry in doc.get("partitions", []):
        problems += _outside_offsets(entry, manifest.partition_facts(files, entry["partition"]))
    problems += _outside_times(doc, files)
    name = (doc.get("stream") or {}).get("name")
    others = [(st.name, [s for s in st.streams if s != name]) for st in files]
    problems += [
        f"{file}: rows of stream {other[0]!r}, not of the manifest's {name!r}" for file, other in others if other
    ]
    return problems


def _outside_times(doc: dict[str, Any], files: list[manifest.FileStats]) -> list[str]:
    """Rows before --from-time, or after --to-time or the export's fixed end, wherever in a file they stand."""
    asked, problems = doc.get("requested") or {}, []
    for end, what in ((doc.get("fixed_end"), "the export's fixed end"), (asked.get("to_time"), "--to-time")):
        late = [st for st in files if end and st.max_ts_us is not None and st.max_ts_us // 1000 > parse_rfc3339_ms(end)]
        problems += [f"{st.name}: a row of {_time(st.max_ts_us)}, after {what} {end}" for st in late]
    start = asked.get("from_time")
    early = [
        st for st in files if start and st.min_ts_us is not None and st.min_ts_us // 1000 < parse_rfc3339_ms(start)
    ]
    return problems + [f"{st.name}: a row of {_time(st.min_ts_us)}, before --from-time {start}" for st in early]


def _time(us: int | None) -> str:
    return ms_to_rfc3339((us or 0) // 1000)


def _outside_offsets(entry: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """A partition's rows before the first offset asked, or past the last."""
    req, p = entry.get("requested") or {}, entry["partition"]
    first, last = req.get("first_offset"), req.get("last_offset")
    problems = []
    if facts["rows"] and _integer(first) and facts["first_offset"] < first:
        problems.append(f"partition {p}: rows from offset {facts['first_offset']}, before the offset {first} asked")
    if facts["rows"] and _integer(last) and facts["last_offset"] > last:
        problems.append(f"partition {p}: rows up to offset {facts['last_offset']}, past the offset {last} asked")
    return problems


def truncation(doc: dict[str, Any]) -> list[str]:
    """Where the export holds less than was asked for, as its manifest records it (the files can match it all the
    same): a start that had left retention, an end after the export ran."""
    notes = []
    for entry in doc.get("partitions", []):
        if entry.get("truncated"):
            asked = (entry.get("requested") or {}).get("first_offset")
            wanted = f"offset {asked}" if asked is not None else f"{(doc.get('requested') or {}).get('from_time')}"
            notes.append(f"partition {entry['partition']} starts at offset {entry.get('first_offset')}, not at the "
                         f"{wanted} asked: the messages before had left retention")  # fmt: skip
    asked_to, end = (doc.get("requested") or {}).get("to_time"), doc.get("fixed_end")
    if asked_to and end and parse_rfc3339_ms(asked_to) > parse_rfc3339_ms(end):
        notes.append(f"it ends at {end}, when it ran, not at the --to-time {asked_to} asked: what came later is "
                     "not in it")  # fmt: skip
    return notes


def verify_bucket(store: ObjectStore, where: BucketPrefix) -> tuple[dict[str, Any], list[str]]:
    """An export in Object Storage against its manifest: every object's size and the MD5 Object Storage reports,
    missing and extra objects by name, then each object's content read back (one at a time, to a temporary file:
    bounded memory) for every fact and the content digest."""
    try:
        doc = checked(store.get_bytes(where.manifest).decode("utf-8", "replace"), where.uri + "/" + MANIFEST_OBJECT)
    except NotFound:
        try:
            store.check_bucket()
        except NotFound:  # not a missing manifest: an auditor who mistyped would be told it was never committed
            raise UsageError(f"{where.uri}: no bucket {where.bucket!r} in namespace {where.namespace!r} (or no "
                             "permission).", "check the bucket's name and the namespace") from None  # fmt: skip
        raise UsageError(f"{where.uri}: no {MANIFEST_OBJECT}; this is not a finished export.") from None
    claimed = {f["name"]: f for f in doc["files"]}
    stored = {o.name.removeprefix(where.prefix + "/"): o for o in store.listing(where.prefix + "/")}
    stored.pop(MANIFEST_OBJECT, None)
    problems = [f"missing object: {name}" for name in sorted(claimed.keys() - stored.keys())]
    problems += [f"extra object: {name}" for name in sorted(stored.keys() - claimed.keys())]
    for name in sorted(claimed.keys() & stored.keys()):
        said, there = claimed[name], stored[name]
        if said.get("bytes") != there.size or (said.get("object_md5") and said["object_md5"] != there.md5):
            says = f"the manifest says {said.get('bytes')} bytes, MD5 {said.get('object_md5')}"
            problems.append(f"altered object: {name} ({says}; Object Storage has {there.size} bytes, MD5 {there.md5})")
    names = sorted(claimed.keys() & stored.keys())
    with tempfile.TemporaryDirectory(prefix="ocigroup-verify-") as tmp:
        files, digest = manifest.scan_files(_fetched(store, where, names, Path(tmp)), doc["format"],
                                            doc["manifest_version"])  # fmt: skip
    return doc, problems + compare(doc, files, digest)


def _fetched(store: ObjectStore, where: BucketPrefix, names: list[str], directory: Path) -> Iterator[Path]:
    """Each object in turn as a file, gone once the next is asked for."""
    for name in names:
        with store.fetched(where.object(name), directory) as path:
            yield path


def verify_uri(profile: Profile, uri: str) -> tuple[dict[str, Any], list[str], str]:
    """`export verify oci://…`, read with the profile's credentials; and the address verified, its namespace
    looked up where it was not given."""
    from ocigroup_cli.client.objects import ObjectStore

    where = parse_bucket(uri, "export verify")
    store = ObjectStore(profile, where.bucket, where.namespace)
    where = where.in_namespace(store.namespace)
    return (*verify_bucket(store, where), where.uri)
