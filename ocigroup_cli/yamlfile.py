"""Safe YAML loading that remembers the line of every value, so errors can name file, line and key.

Only plain YAML types are accepted (no python tags). Aliases are allowed but the document is bounded
(size and node count), so a "billion laughs" file is refused quickly instead of exploding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ocigroup_cli.errors import ConfigError

MAX_BYTES = 1024 * 1024
MAX_NODES = 20_000
_PLAIN_TAGS = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")}
Lines = dict[tuple[str, ...], int]


def load(path: Path) -> tuple[Any, Lines]:
    """Return the document and a map from key path to 1-based line number."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file.", "create it or pass --config PATH") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}).") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{path}: the file is larger than {MAX_BYTES} bytes; a profile file is much smaller.")
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
