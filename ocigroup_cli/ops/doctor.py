"""`ocigroup doctor`: what stands between the active profile and a working command, checked in order, one verdict
each (OK, FAIL, WARN, SKIPPED) with the exact fix of a FAIL. Nothing is changed unless `write_probes` is asked.

The key first (readable, not by others, its pass phrase, its fingerprint against the profile's: no network), then
the endpoint (resolves, TLS verifies, the clock against the service's `Date`), authentication (one signed
read-only call: a 401 told apart from a 404), and then each permission the commands need, probed by a call
without side effects (ops/probes.py). OCI answers a missing policy as it answers a missing resource (404), so a
probe that fails names both causes and the narrowest statement that grants the permission.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from ocigroup_cli.client import auth, tls
from ocigroup_cli.client.probe import Unsigned, first_answer
from ocigroup_cli.client.regions import streaming_endpoint
from ocigroup_cli.client.signing import ApiKeySigner
from ocigroup_cli.client.transport import Proxy, proxy_for
from ocigroup_cli.config import Profile
from ocigroup_cli.core import shellword
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import human_duration
from ocigroup_cli.errors import ConfigError, OcigroupError
from ocigroup_cli.ops.check import FAIL, OK, SKIPPED, WARN, Check, Identity
from ocigroup_cli.ops.probes import Probes

MAX_SKEW_S = 300  # the service refuses a signature dated further off
WARN_SKEW_S = 60
FIRST_CALL_TIMEOUT_S = 10.0
CLOCK_FIX = "set the clock right: enable NTP (`timedatectl set-ntp true`) or step it once (`chronyc makestep`)"


class Doctor:
    def __init__(self, profile: Profile, clock: Clock, write_probes: bool = False) -> None:
        self.profile = profile
        self.clock = clock
        self.write_probes = write_probes
        self.identity: Identity | None = None
        self.failed: set[str] = set()

    def run(self) -> Iterator[Check]:
        """Every check in order; a check that needs an earlier one's result is SKIPPED when that one failed."""
        for check in self._checks():
            if check.status == FAIL:
                self.failed.add(check.id)
            yield check

        if self.failed & {"endpoint", "tls", "auth", "key-file", "key-passphrase"}:
            yield Check("permissions", SKIPPED, "not probed: a check above failed (fix it, then run doctor again)")
            return
        yield from Probes(self.profile, self.identity, self.clock, self.write_probes).run()

    def _checks(self) -> Iterator[Check]:
        yield Check("profile", OK, self._profile_line())
        yield from self._key_checks()
        yield from self._network_checks()

    def _profile_line(self) -> str:
        p = self.profile
        where = f" from {p.file}" if p.file else " (built in)" if p.local else ""
        return f"profile {p.name!r}{where}, auth method {p.settings.auth.method}"

    # -- the key: no network -------------------------------------------------------------------------------

    def _identity(self) -> Identity | None:
        s = self.profile.settings
        method = s.auth.method
        if method == "api_key":
            env = s.auth.pass_phrase_env
            return Identity(
                s.auth.key_file, os.environ.get(env) if env else None, auth.pass_phrase_hint(env), s.auth.tenancy,
                s.auth.user, s.auth.fingerprint, s.region,
            )  # fmt: skip
        if method in ("oci_config", "security_token"):
            values = auth.oci_config_values(self.profile)
            fingerprint = values.get("fingerprint") if method == "oci_config" else None
            return Identity(
                values["key_file"], values.get("pass_phrase"), auth.PASS_IN_CONFIG, values.get("tenancy"),
                values.get("user"), fingerprint, auth.config_region(self.profile, values),
            )  # fmt: skip
        return None

    def _key_checks(self) -> Iterator[Check]:
        try:
            self.identity = ident = self._identity()
        except ConfigError as exc:
            yield Check("key-file", FAIL, exc.message, exc.hint or "fix the profile's auth settings")
            return
        if ident is None:
            what = self.profile.settings.auth.method
            yield Check("key-file", SKIPPED, f"auth method {what}: no API key file to check")
            return
        if not ident.key_file:
            yield Check("key-file", FAIL, "auth.key_file is not set", "set auth.key_file to your API key's private PEM")
            return
        path = Path(ident.key_file).expanduser()
        if not path.is_file() or not _readable(path):
            problem = "no such file" if not path.exists() else "cannot be read by this user"
            yield Check("key-file", FAIL, f"{path}: {problem}", "point auth.key_file at your API key's private PEM")
            return
        yield Check("key-file", OK, str(path))
        warning = auth.permission_warning(path)
        if warning:
            yield Check("key-permissions", WARN, warning.split(";")[0], f"chmod 600 {shellword.quote(str(path))}")
        else:
            yield Check("key-permissions", OK, "readable by its owner only")
        try:
            ident.key = auth.load_private_key(str(path), ident.pass_phrase, "key", ident.pass_hint)
            ident.real_fingerprint = auth.fingerprint_of(ident.key)
        except ConfigError as exc:
            yield Check("key-passphrase", FAIL, exc.message.removeprefix(f"key {path}: "), exc.hint)
            return
        yield Check("key-passphrase", OK, "the pass phrase opens it" if ident.pass_phrase else "not encrypted")
        yield self._fingerprint_check(ident)

    def _fingerprint_check(self, ident: Identity) -> Check:
        real = ident.real_fingerprint
        if ident.fingerprint is None:
            return Check("fingerprint", OK, f"computed from the key: {real} (the one uploaded for your user)")
        if ident.fingerprint.strip().lower() != real:
            return Check(
                "fingerprint",
                FAIL,
                f"the profile says {ident.fingerprint.strip()}, but the key file's fingerprint is {real}",
                f"set the fingerprint to {real} (or leave it out: ocigroup computes it); if the service knows your "
                f"key as {ident.fingerprint.strip()}, the key file is the wrong one",
            )
        return Check("fingerprint", OK, f"{real} matches the key")

    # -- the endpoint, the clock, authentication -------------------------------------------------------------

    def endpoint(self) -> str:
        region = self.identity.region if self.identity else self.profile.settings.region
        return str(self.profile.settings.endpoint or streaming_endpoint(region))

    def _network_checks(self) -> Iterator[Check]:
        url = self.endpoint()
        parts = urlsplit(url)
        host, proxy = parts.hostname or "", proxy_for(url)
        resolved = _resolve(host, parts.port or (443 if parts.scheme == "https" else 80), proxy)
        if resolved is not None:
            fix = "check the region or endpoint of the profile, and DNS"
            yield Check("endpoint", FAIL, f"{url}: cannot resolve {host} ({resolved})", fix)
            yield Check("auth", SKIPPED, "needs the endpoint")
            return
        via = f" through the proxy {proxy.url} (from {proxy.source})" if proxy else ""
        sent_at, answer, failure = self._first_call(url)
        if failure is not None:
            exc, error = failure
            if isinstance(exc, ssl.SSLError):
                yield Check("endpoint", OK, f"{url}{via}")
                yield Check("tls", FAIL, error.message, error.hint)
            else:
                yield Check("endpoint", FAIL, error.message, error.hint)
            yield Check("auth", SKIPPED, "needs an answer from the endpoint")
            return
        yield Check("endpoint", OK, f"{url}{via}")
        yield self._tls_check(url, parts.scheme, host)
        yield self._clock_check(answer, sent_at)
        yield self._auth_check(answer)

    def _first_call(self, url: str) -> tuple[float, Any, tuple[BaseException, OcigroupError] | None]:
        """One read-only call: signed when the key loaded (then its status tells authentication), else unsigned."""
        ident = self.identity
        signer: Any = Unsigned()
        if ident is not None and ident.key is not None and ident.tenancy and ident.user:
            signer = ApiKeySigner(f"{ident.tenancy}/{ident.user}/{ident.signing_fingerprint}", ident.key)
        context = tls.context(self.profile.settings.cert_bundle) if url.startswith("https:") else None
        s = self.profile.settings.stream
        path, query = f"/streams/{quote(s.id or '', safe='')}", None
        if not s.id:
            where = s.compartment or (ident.tenancy if ident else None) or ""
            path, query = "/streams", {"compartmentId": where, "limit": 1}
        sent_at = self.clock.time_ms() / 1000
        answer, failure = first_answer(url, signer, context, path, query, FIRST_CALL_TIMEOUT_S)
        return (sent_at + self.clock.time_ms() / 1000) / 2, answer, failure

    def _tls_check(self, url: str, scheme: str, host: str) -> Check:
        from ocigroup_cli.client.transport import is_loopback

        if scheme == "https":
            bundle = self.profile.settings.cert_bundle
            return Check("tls", OK, "the certificate verifies" + (f" (CA bundle {bundle})" if bundle else ""))
        if is_loopback(host):
            return Check("tls", SKIPPED, "plain http to this machine (a local emulator): nothing to verify")
        detail = f"{url} is plain http: requests and messages cross the network unencrypted"
        return Check("tls", WARN, detail, "use the https:// endpoint")

    def _clock_check(self, answer: Any, local_s: float) -> Check:
        raw = answer.date
        try:
            service_s = parsedate_to_datetime(raw).timestamp()
        except (TypeError, ValueError):
            return Check("clock", WARN, "the endpoint's answer has no Date header to compare the clock with")
        skew = service_s - local_s
        words = _duration(abs(skew))
        if abs(skew) < 2:
            return Check("clock", OK, "within a second or two of the service's")
        way = "behind" if skew > 0 else "ahead of"
        detail = f"yours is {words} {way} the service's ({raw})"
        if abs(skew) > MAX_SKEW_S:
            return Check("clock", FAIL, f"{detail}: past 5 minutes every signed request is refused (401)", CLOCK_FIX)
        if abs(skew) > WARN_SKEW_S:
            return Check("clock", WARN, detail, CLOCK_FIX)
        return Check("clock", OK, detail)

    def _auth_check(self, answer: Any) -> Check:
        ident = self.identity
        if ident is None or ident.key is None or not (ident.tenancy and ident.user):
            return Check("auth", SKIPPED, "needs a usable API key and auth.tenancy / auth.user")
        if not answer.not_authenticated:
            return Check("auth", OK, f"the service accepts the key (a signed GET answered {answer.status})")
        if "clock" in self.failed:
            return Check("auth", FAIL, "401 NotAuthenticated: the clock (above) is the likely cause", CLOCK_FIX)
        real = ident.real_fingerprint
        return Check(
            "auth",
            FAIL,
            f"401 NotAuthenticated: the service knows no key {ident.signing_fingerprint} for user {ident.user} "
            f"in tenancy {ident.tenancy}",
            f"upload the public half of {ident.key_file} (fingerprint {real}) to that user (Console: Identity > "
            "Users > API keys > Add API key; `oci iam user api-key upload`), or correct auth.user and auth.tenancy",
        )


def _readable(path: Path) -> bool:
    try:
        with path.open("rb"):
            return True
    except OSError:
        return False


def _resolve(host: str, port: int, proxy: Proxy | None) -> str | None:
    """None when `host` resolves (through a proxy, the proxy resolves it); else why not."""
    if proxy is not None:
        return None
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return exc.strerror
    return None


def _duration(seconds: float) -> str:
    """`about 7 min (6m 59s)`: a Date header tells whole seconds, and the answer took some time to come."""
    return human_duration(seconds) if seconds < 60 else f"about {round(seconds / 60)} min ({human_duration(seconds)})"
