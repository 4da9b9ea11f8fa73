"""Read the tenancy file of `ocigroup emulator serve --iam FILE` (its shape: docs/iam.md).

A file with anything wrong is refused whole, with its line and the reason (IamFileError): a half-read policy
would authorize what the file does not say. Key paths are read relative to the file's directory.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from ocigroup_cli.iam.keys import fingerprint, load_public_key
from ocigroup_cli.iam.policy import PolicyError, parse
from ocigroup_cli.iam.tenancy import Grant, Tenancy, User

MAX_FILE_BYTES = 1 << 20
MAX_KEY_BYTES = 64 << 10
_FINGERPRINT = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){15}")
SHAPES = {
    "": ("tenancy", "compartments", "groups", "users", "policies"),
    "compartment": ("name", "id", "parent", "description"),
    "group": ("name", "id"),
    "user": ("id", "name", "keys", "fingerprints", "groups"),
    "policy": ("compartment", "name", "statements"),
}


class IamFileError(ValueError):
    """`FILE:LINE: reason` of a tenancy file that cannot be used."""


def load(path: Path) -> Tenancy:
    """The tenancy file at `path`, checked whole."""
    import yaml

    raw = _read(path, MAX_FILE_BYTES, str(path))
    try:
        root = yaml.compose(raw.decode("utf-8"), Loader=yaml.SafeLoader)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise IamFileError(f"{path}: not YAML ({str(exc).splitlines()[0]}).") from None
    except RecursionError:  # PyYAML's composer recurses once a level
        raise IamFileError(f"{path}: nested deeper than a tenancy file can be.") from None
    if root is None:
        raise IamFileError(f"{path}: empty; it needs at least 'tenancy:'.")
    return _Reader(path).tenancy(root)


def _read(path: Path, limit: int, what: str) -> bytes:
    """A file's bytes, refused in one line when it cannot be read, is not a regular file (/dev/zero filled the
    memory, a FIFO waited for ever) or is larger than `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO must not block the open
    except OSError as exc:
        raise IamFileError(f"{what}: cannot read it ({exc.strerror}).") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IamFileError(f"{what}: not a regular file.")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise IamFileError(f"{what}: larger than {limit:,} bytes.")
    return data


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, node: Any, reason: str) -> IamFileError:
        return IamFileError(f"{self.path}:{node.start_mark.line + 1}: {reason}")

    def fields(self, node: Any, shape: str) -> dict[str, Any]:
        """A mapping's value nodes by key, every key one the shape knows."""
        import yaml

        what = f"a {shape}" if shape else "the file"
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping of keys to values.")
        found: dict[str, Any] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else ""
            if name not in SHAPES[shape]:
                raise self.fail(key, f"unknown key {name!r} in {what} (known: {', '.join(SHAPES[shape])}).")
            found[name] = value
        return found

    def items(self, node: Any | None, what: str) -> list[Any]:
        import yaml

        if node is None:
            return []
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be a list.")
        return list(node.value)

    def text(self, node: Any | None, what: str, ocid: str = "") -> str:
        import yaml

        if node is None or not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
            raise self.fail(node or self._at, f"{what} must be a non-empty string.")
        value = str(node.value).strip()
        if ocid and not value.startswith(f"ocid1.{ocid}."):
            raise self.fail(node, f"{what} {value!r} is not an OCID of a {ocid} (ocid1.{ocid}.…).")
        return value

    def tenancy(self, root: Any) -> Tenancy:
        self._at = root
        top = self.fields(root, "")
        if "tenancy" not in top:
            raise self.fail(root, "'tenancy:' (the tenancy's OCID, the root compartment) is missing.")
        tenancy_id = self.text(top["tenancy"], "tenancy", "tenancy")
        parents, names = self.compartments(top.get("compartments"), tenancy_id)
        group_ids = self.groups(top.get("groups"))
        users = self.users(top.get("users"))
        t = Tenancy(tenancy_id, parents, names, users, group_ids, [])
        t.grants = self.policies(top.get("policies"), t)
        return t

    def compartments(self, node: Any | None, tenancy_id: str) -> tuple[dict[str, str | None], dict[str, str]]:
        rows = []
        by_name: dict[str, str] = {"": tenancy_id}
        for item in self.items(node, "compartments"):
            f = self.fields(item, "compartment")
            self._at = item
            name, cid = (
                self.text(f.get("name"), "a compartment's name"),
                self.text(f.get("id"), "its id", "compartment"),
            )
            if name in by_name or cid in by_name.values():
                raise self.fail(item, f"compartment {name!r} ({cid}) is named twice; names and OCIDs must be unique.")
            by_name[name] = cid
            rows.append((item, cid, None if f.get("parent") is None else self.text(f["parent"], "parent")))
        parents: dict[str, str | None] = {tenancy_id: None}
        for item, cid, parent in rows:
            parent_id = by_name.get(parent, parent) if parent else tenancy_id
            if parent_id not in by_name.values():
                raise self.fail(item, f"parent {parent!r} is not a compartment of this file (nor the tenancy).")
            parents[cid] = parent_id
        names = {cid: name for name, cid in by_name.items()}
        names[tenancy_id] = "tenancy"
        probe = Tenancy(tenancy_id, parents, names, {}, {}, [])
        for item, cid, _ in rows:
            if tenancy_id not in probe.ancestors(cid):
                raise self.fail(item, f"compartment {names[cid]!r} is its own ancestor: the parents make a loop.")
        return parents, names

    def groups(self, node: Any | None) -> dict[str, str]:
        found = {}
        for item in self.items(node, "groups"):
            f = self.fields(item, "group")
            self._at = item
            found[self.text(f.get("id"), "a group's id", "group")] = self.text(f.get("name"), "its name").lower()
        return found

    def users(self, node: Any | None) -> dict[str, User]:
        users: dict[str, User] = {}
        for item in self.items(node, "users"):
            f = self.fields(item, "user")
            self._at = item
            uid = self.text(f.get("id"), "a user's id", "user")
            if uid in users:
                raise self.fail(item, f"user {uid} is listed twice.")
            groups = frozenset(self.text(g, "a group's name").lower() for g in self.items(f.get("groups"), "groups"))
            user = User(uid, groups)
            for key in self.items(f.get("keys"), "keys"):
                public = self.public_key(key)
                user.keys[fingerprint(public)] = public
            prints = [self.text(p, "a fingerprint").lower() for p in self.items(f.get("fingerprints"), "fingerprints")]
            for p, printed in zip(self.items(f.get("fingerprints"), "fingerprints"), prints, strict=True):
                if not _FINGERPRINT.fullmatch(printed):
                    raise self.fail(p, f"{printed!r} is not a key fingerprint (16 hex pairs joined by ':').")
            user.fingerprints = frozenset(prints)
            users[uid] = user
        return users

    def public_key(self, node: Any) -> Any:
        given = self.text(node, "a key (a PEM file's path, or the PEM itself)")
        if given.startswith("-----BEGIN"):
            data = given.encode()
        else:
            try:
                data = _read((self.path.parent / Path(given).expanduser()).resolve(), MAX_KEY_BYTES, f"key {given}")
            except IamFileError as exc:
                raise self.fail(node, str(exc)) from None
        try:
            return load_public_key(data)
        except ValueError as exc:
            raise self.fail(node, f"key {given[:60]}: {exc}.") from None

    def policies(self, node: Any | None, t: Tenancy) -> list[Grant]:
        grants = []
        for item in self.items(node, "policies"):
            f = self.fields(item, "policy")
            self._at = item
            where = t.id
            if f.get("compartment") is not None:
                where = self.compartment(f["compartment"], t)
            for line in self.items(f.get("statements"), "statements"):
                text = self.text(line, "a statement")
                try:
                    statement = parse(text)
                except PolicyError as exc:
                    raise self.fail(line, f"{exc}: {text!r}") from None
                grants.append(
                    Grant(statement, self.location(line, statement.location, where, t), line.start_mark.line + 1)
                )
        return grants

    def compartment(self, node: Any, t: Tenancy) -> str:
        """A policy's compartment, by name or OCID (or `tenancy`)."""
        given = self.text(node, "a policy's compartment")
        if given in ("tenancy", t.id):
            return t.id
        by_name = {n: c for c, n in t.names.items()}
        found = given if given in t.parents else by_name.get(given)
        if found is None:
            raise self.fail(node, f"compartment {given!r} is not in this file's compartments.")
        return found

    def location(self, node: Any, location: tuple[str, ...], attached: str, t: Tenancy) -> str:
        """The compartment a statement's `in …` names, checked as IAM checks it: at or below its policy's."""
        if location[0] == "tenancy":
            if attached != t.id:
                raise self.fail(node, "'in tenancy' is only allowed in a policy attached to the tenancy.")
            return t.id
        if location[0] == "id":
            target = location[1]
            if target not in t.parents:
                raise self.fail(node, f"compartment id {target} is not in this file's compartments.")
        else:
            target = attached
            for name in location[1:]:
                children = [c for c, p in t.parents.items() if p == target and t.names[c] == name]
                if not children:
                    raise self.fail(
                        node,
                        f"compartment {':'.join(location[1:])!r} is not below {t.names[attached]!r} "
                        "(where the policy is attached).",
                    )
                target = children[0]
        if attached not in t.ancestors(target):
            raise self.fail(
                node, f"compartment {target} is not at or below {t.names[attached]!r} (where the policy is attached)."
            )
        return target
