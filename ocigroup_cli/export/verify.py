"""`export verify`: recompute a manifest's every claim from the files and list what differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.errors import UsageError
from ocigroup_cli.export import manifest

FILE_FIELDS = ("rows", "first_offset", "last_offset", "first_timestamp", "last_timestamp", "bytes", "sha256")


def load(directory: Path) -> dict[str, Any]:
    path = directory / manifest.MANIFEST
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory.", "pass the --out directory of an export")
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no manifest; this is not a finished export.") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc}).") from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") not in manifest.EXTENSIONS
        or not isinstance(doc.get("files"), list)
    ):
        raise UsageError(f"{path}: not an ocigroup export manifest.")
    if doc.get("manifest_version") not in (1, manifest.VERSION):
        raise UsageError(
            f"{path}: manifest version {doc.get('manifest_version')!r} is not one this ocigroup knows "
            f"(1 to {manifest.VERSION}).",
            "verify it with the ocigroup version that wrote it (the manifest's tool.version)",
        )
    return doc


def _differ(what: str, claimed: Any, found: Any) -> str:
    said = "nothing" if claimed is None else repr(claimed)
    shown = "nothing (no readable rows)" if found is None else repr(found)
    return f"{what}: the manifest says {said}, the files show {shown}"


def verify(directory: Path) -> tuple[dict[str, Any], list[str]]:
    """The manifest and the list of differences (empty when every claim holds)."""
    doc = load(directory)
    fmt = doc["format"]
    claimed = {f["name"]: f for f in doc["files"]}
    present = {p.name for p in directory.iterdir()} - {manifest.MANIFEST}
    problems = [f"missing file: {name}" for name in sorted(claimed.keys() - present)]
    problems += [f"extra file: {name}" for name in sorted(present - claimed.keys())]
    files, digest = manifest.scan(directory, fmt, doc["manifest_version"])
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
    total = sum(f.rows for f in files)
    if doc.get("rows") != total:
        problems.append(_differ("total rows", doc.get("rows"), total))
    if doc.get("content_digest", {}).get("value") != digest:
        problems.append(_differ("content digest", doc.get("content_digest", {}).get("value"), digest))
    return doc, problems


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
