"""A verdict of `ocigroup doctor` (ops/doctor.py, ops/probes.py): what was checked, how it came out, and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OK, FAIL, WARN, SKIPPED = "OK", "FAIL", "WARN", "SKIPPED"


@dataclass
class Check:
    id: str
    status: str
    detail: str
    fix: str | None = None
    statements: list[str] = field(default_factory=list)  # narrowest first, for a missing permission

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "status": self.status, "detail": self.detail, "fix": self.fix}
        if self.statements:
            out["statements"] = self.statements
        return out


@dataclass
class Identity:
    """The signing identity the profile names (api_key or an OCI config file's)."""

    key_file: str | None
    pass_phrase: str | None
    pass_hint: str
    tenancy: str | None
    user: str | None
    fingerprint: str | None
    region: str
    key: Any = None  # the private key, once it loads
    real_fingerprint: str | None = None  # the key's own fingerprint, once it loads

    @property
    def signing_fingerprint(self) -> str | None:
        """The fingerprint the commands sign with: the profile's, else the key's own."""
        return self.fingerprint.strip() if self.fingerprint else self.real_fingerprint
