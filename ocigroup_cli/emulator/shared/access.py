"""IAM in the emulator (`serve --iam FILE`): who signed a request, and whether a policy of the tenancy file
allows the call, refused with the answer the service gives (a 404 that cannot be told from "not found", a 409 on
a create). Off by default: without a tenancy file every trusted key may do everything.

The file is read again when it changes (as a policy edit takes effect on the service within seconds); a changed
file that does not load is logged and the last good one kept.
"""

from __future__ import annotations

import hashlib
import logging
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocigroup_cli.emulator.shared.errors import ServiceError
from ocigroup_cli.iam import file as iamfile
from ocigroup_cli.iam.permissions import OPERATIONS
from ocigroup_cli.iam.tenancy import Tenancy

log = logging.getLogger("ocigroup.emulator")
DIGEST_UP_TO = 256 * 1024  # a tenancy file this size or less is read at each request to see whether it changed


@dataclass(frozen=True)
class Principal:
    """Who signed a request: the three fields of its keyId."""

    tenancy: str
    user: str
    fingerprint: str


class Access:
    def __init__(self, path: Path, trusted: dict[str, Any]) -> None:
        self.path = path
        self.trusted = trusted  # --trusted-key keys by fingerprint: the PEMs of a user's `fingerprints`
        self.tenancy = iamfile.load(path)  # IamFileError at start: the server refuses to start
        self._seen = self._stamp()
        self._lock = threading.Lock()

    def _stamp(self) -> tuple[int, int, int, bytes] | None:
        """What tells a changed file: its time, size, inode and (a file of a tenancy's size) a digest of its bytes,
        since two edits within the file system's timestamp granularity may leave the same time and size."""
        try:
            st = self.path.stat()
            small = stat.S_ISREG(st.st_mode) and st.st_size <= DIGEST_UP_TO  # a link swapped to /dev/zero: not read
            digest = hashlib.sha256(self.path.read_bytes()).digest() if small else b""
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino, digest

    def current(self) -> Tenancy:
        stamp = self._stamp()
        if stamp == self._seen:
            return self.tenancy
        with self._lock:
            if stamp != self._seen:
                self._seen = stamp
                try:
                    self.tenancy = iamfile.load(self.path)
                    log.warning("IAM: %s read again", self.path)
                except iamfile.IamFileError as exc:
                    log.error("IAM: the changed file is not used, the last good one is: %s", exc)
        return self.tenancy

    def key(self, tenancy: str, user: str, fingerprint: str) -> Any | None:
        """The key that signs as `user`. Verifying a request's signature is where the file is looked at again: the
        request's checks then use that reading (`self.tenancy`), one look at the file per request."""
        return self.current().key(tenancy, user, fingerprint, self.trusted)

    def check(
        self,
        who: Principal | None,
        operation: str,
        compartment: str | None,
        variables: dict[str, Any],
        refusal: Callable[[], ServiceError],
    ) -> None:
        """Raise `refusal()` unless a statement allows `operation` to `who` in `compartment`. A resource that does
        not exist (`compartment` None) is left to the service's own not-found answer, which is the same."""
        if who is None or compartment is None:
            return
        need = OPERATIONS[operation]
        tenancy = self.tenancy  # as read when the request's signature was verified (key())
        context = {**variables, "request.operation": operation}
        results = (tenancy.allows(who.user, p, compartment, context) for p in need.permissions)
        if not (any(results) if need.any_of else all(results)):
            log.info("IAM: %s refused %s in %s", who.user, operation, compartment)
            raise refusal()


def not_authorized_or_exists() -> ServiceError:
    """A create the caller may not make: the service's answer instead of the 404."""
    return ServiceError(
        409,
        "NotAuthorizedOrResourceAlreadyExists",
        "Authorization failed or the resource already exists.",  # the code is documented; these words are assumed
    )
