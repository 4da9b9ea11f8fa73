"""Safe YAML loading that remembers the line of every value, so errors can name file, line and key.

Only plain YAML types are accepted (no python tags). Aliases are allowed but the document is bounded
(size and node count), so a "billion laughs" file is refused quickly instead of exploding.

A file parsed before is taken from `profiles.json` in the state directory, found by the SHA-256 of its bytes:
PyYAML's import alone is about 20 ms of every command's start, and the profile file seldom changes. Only what
JSON gives back unchanged is kept there (a document with a YAML timestamp is parsed each time); a file that
does not parse is never kept, so its error is found and shown every time. Best effort: an unreadable or
unwritable state directory only means parsing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocigroup_cli import inputs
from ocigroup_cli.errors import ConfigError, OcigroupError
from ocigroup_cli.paths import keep_newest, read_json_object, state_dir

if TYPE_CHECKING:
    import yaml

MAX_BYTES = 1024 * 1024
MAX_NODES = 20_000
MAX_DEPTH = 64  # a profile nests a few levels: deeper is a hostile file (or an alias that holds itself)
_PLAIN_TAGS = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")}
Lines = dict[tuple[str, ...], int]
KEEP_PARSED = 8  # files whose parse is kept (the oldest dropped)


def load(path: Path, trust: Callable[[os.stat_result], None] = lambda st: None) -> tuple[Any, Lines]:
    """Return the document and a map from key path to 1-based line number (`trust`: see inputs.read_bytes)."""
    try:
        raw = inputs.read_bytes(path, MAX_BYTES, "profile file", trust)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file.", "create it or pass --config PATH") from None
    digest = hashlib.sha256(raw).hexdigest()
    kept = _parsed(digest)
    if kept is not None:
        return kept
    doc, lines = _parse(path, raw)
    _keep(digest, doc, lines)
    return doc, lines


def _cache() -> Path:
    return state_dir() / "profiles.json"


def _parsed(digest: str) -> tuple[Any, Lines] | None:
    with contextlib.suppress(OcigroupError, TypeError, ValueError, KeyError):
        entry = read_json_object(_cache())[digest]
        return entry["doc"], {tuple(keys): int(line) for keys, line in entry["lines"]}
    return None


def _keep(digest: str, doc: Any, lines: Lines) -> None:
    entry = {"doc": doc, "lines": [[list(keys), line] for keys, line in lines.items()]}
    with contextlib.suppress(OcigroupError, OSError, TypeError, ValueError):
        if json.loads(json.dumps(entry, allow_nan=False))["doc"] != doc:
            return  # JSON would not give this document back as it is
        keep_newest(_cache(), digest, entry, KEEP_PARSED)


def _parse(path: Path, raw: bytes) -> tuple[Any, Lines]:
    import yaml

    try:
        text = raw.decode("utf-8")
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the file is not UTF-8 text.") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML ({exc.problem}).") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc}).") from None
    except RecursionError:  # PyYAML's composer recurses once a level
        raise ConfigError(f"{path}: nested deeper than a profile file can be.") from None
    if node is None:
        return {}, {}
    lines: Lines = {}
    counter = [0]
    constructor = yaml.SafeLoader("")

    def walk(n: yaml.Node, keys: tuple[str, ...]) -> Any:
        counter[0] += 1
        if counter[0] > MAX_NODES:
            raise ConfigError(f"{path}: the document expands to more than {MAX_NODES} values (alias bomb?).")
        lines[keys] = n.start_mark.line + 1
        if len(keys) > MAX_DEPTH:
            raise ConfigError(f"{path}:{n.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels (or an alias "
                              "that holds itself).")  # fmt: skip
        if n.tag not in _PLAIN_TAGS:
            raise ConfigError(f"{path}:{n.start_mark.line + 1}: YAML tag {n.tag!r} is not allowed in a profile file.")
        if isinstance(n, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in n.value:
                key = walk(key_node, (*keys, "<key>"))
                if not isinstance(key, str):
                    raise ConfigError(f"{path}:{key_node.start_mark.line + 1}: keys must be strings, got {key!r}.")
                if key in out:
                    raise ConfigError(f"{path}:{key_node.start_mark.line + 1}: key {key!r} appears twice.")
                out[key] = walk(value_node, (*keys, key))
                lines[(*keys, key)] = key_node.start_mark.line + 1  # report the key's line, not its value's
            return out
        if isinstance(n, yaml.SequenceNode):
            return [walk(item, (*keys, str(i))) for i, item in enumerate(n.value)]
        return constructor.construct_object(n)

    return walk(node, ()), lines
