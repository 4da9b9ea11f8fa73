"""A tenancy as IAM sees it: compartments, users with their API keys and groups, the statements of its policies;
and the two questions the emulator asks of it, `key()` (who signed) and `allows()` (may they). iam/file.py reads
it from the file of `ocigroup emulator serve --iam FILE`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ocigroup_cli.iam.permissions import granted
from ocigroup_cli.iam.policy import Statement


@dataclass
class User:
    id: str
    groups: frozenset[str]  # lowercase names
    keys: dict[str, Any] = field(default_factory=dict)  # fingerprint -> RSA public key
    fingerprints: frozenset[str] = frozenset()  # keys given by fingerprint (their PEM is a --trusted-key)


@dataclass(frozen=True)
class Grant:
    statement: Statement
    compartment: str  # the OCID its location names
    line: int


@dataclass
class Tenancy:
    id: str
    parents: dict[str, str | None]  # compartment OCID -> its parent's (the tenancy: None)
    names: dict[str, str]  # compartment OCID -> name
    users: dict[str, User]
    group_ids: dict[str, str]  # group OCID -> lowercase name
    grants: list[Grant]

    def ancestors(self, compartment: str) -> list[str]:
        """`compartment` and the ones above it, up to the tenancy; [] for a compartment the file does not name."""
        chain: list[str] = []
        seen: set[str] = set()  # a loop ends the walk (a list's `in` made a long chain's check cubic)
        current: str | None = compartment
        while current is not None and current in self.parents and current not in seen:
            chain.append(current)
            seen.add(current)
            current = self.parents[current]
        return chain

    def allows(self, user_id: str, permission: str, compartment: str, variables: dict[str, Any]) -> bool:
        """Whether some statement grants `permission` to the user in `compartment` (or a compartment above it)."""
        user = self.users.get(user_id)
        chain = self.ancestors(compartment)
        if user is None or not chain:
            return False
        context = {
            **variables,
            "request.permission": permission,
            "request.user.id": user_id,
            "request.groups.id": tuple(i for i, n in self.group_ids.items() if n in user.groups),
            "target.compartment.id": compartment,
            "target.compartment.name": self.names.get(compartment, ""),
            "target.tenant.id": self.id,
        }
        for g in self.grants:
            s = g.statement
            if (
                not self._subject(s, user)
                or g.compartment not in chain
                or permission not in granted(s.verb, s.resource_type)
            ):
                continue
            if s.condition is None or s.condition.holds(context):
                return True
        return False

    def _subject(self, s: Statement, user: User) -> bool:
        return (
            s.any_user or bool(s.groups & user.groups) or any(self.group_ids.get(i) in user.groups for i in s.group_ids)
        )

    def key(self, tenancy: str, user_id: str, fingerprint: str, trusted: dict[str, Any]) -> Any | None:
        """The public key that signs as `user_id` with `fingerprint`, or None (the service's 401)."""
        user = self.users.get(user_id)
        if tenancy != self.id or user is None:
            return None
        fingerprint = fingerprint.lower()
        if fingerprint in user.keys:
            return user.keys[fingerprint]
        return trusted.get(fingerprint) if fingerprint in user.fingerprints else None
