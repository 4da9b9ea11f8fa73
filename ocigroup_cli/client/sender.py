"""Sending one request to the OCI Streaming REST API: signed, over keep-alive connections, waiting its turn under
the service's rate for its operation, retried inside the profile's deadline (or patiently), with failures mapped
to the CLI's error tree and their opc-request-id. The operations themselves are in client/streaming.py.
"""

from __future__ import annotations

import http.client
import math
import random
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple, Self

from ocigroup_cli.client import tls
from ocigroup_cli.client.auth import Credentials, credentials
from ocigroup_cli.client.errors import connection_failure, proxy_refusal, retry_after, service_failure
from ocigroup_cli.client.pacing import Pacer
from ocigroup_cli.client.regions import streaming_endpoint
from ocigroup_cli.client.transport import API_VERSION, MAX_ANSWER_BYTES, Response, TooLarge, Transport
from ocigroup_cli.config import Profile
from ocigroup_cli.core import backoff
from ocigroup_cli.core.clock import TEST_CLOCK_HEADER, Clock
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import BadAnswer, ConfigError, NotFound, OcigroupError, Throttled, TransientError

EMULATOR_CLOCK_TIMEOUT_S = 2.0
# what the service sends at most, with margin, where it is more than transport.MAX_ANSWER_BYTES: a GetMessages of
# 10,000 messages, whose size the service chooses (ocigroup's own reads ask for 8 MiB of base64 at most)
ANSWER_BYTES = {"GetMessages": 64 << 20}
# what a proxy answers itself to a plain-HTTP request it will not (or cannot) pass on: the service's own answers carry
# an opc-request-id
PROXY_ANSWERS = (403, 405, 407, 502, 504)


class Waiting(NamedTuple):
    """The request in flight, for a person watching a terminal: what they are waiting for, and how long yet."""

    operation: str
    attempt: int
    since: float  # the clock's monotonic time when the request (its first attempt) started
    until: float  # ... and when its deadline ends
    cause: str | None = None  # why the previous attempt failed; None during the first one


class Sender:
    API_VERSION = API_VERSION  # the path every request goes under (the Streaming API's; Monitoring has its own)

    def __init__(
        self,
        profile: Profile,
        clock: Clock,
        trace: Callable[[str], None] | None = None,
        rng: random.Random | None = None,
        creds: Credentials | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.profile = profile
        self.clock = clock
        self.trace = trace
        self.rng = rng or random.Random()
        self._creds = creds
        # shared by clones: the service's rates count the whole process's requests
        self.pacer = pacer or Pacer(clock, on=bool(profile.settings.pace_requests))
        self._transports: dict[str, Transport] = {}
        # a 404 for a request under a stream: the stream found instead, to send it to once more (client/streaming.py)
        self.on_stream_missing: Callable[[StreamInfo, OcigroupError], StreamInfo | None] | None = None
        self.on_service_time: Callable[[int], None] | None = None  # an answer told the service's own clock (ms)
        self.reconnecting: Callable[[], None] | None = None  # before a connection opened again (client/transport.py)
        self.waiting: Waiting | None = None  # the request in flight (read by a status display thread)

    def clone(self) -> Self:
        """Another client with the same profile, credentials and hooks but its own connections (one per thread)."""
        other = type(self)(self.profile, self.clock, self.trace, random.Random(), self.creds, self.pacer)
        other.on_stream_missing, other.on_service_time = self.on_stream_missing, self.on_service_time
        other.reconnecting = self.reconnecting
        return other

    @property
    def creds(self) -> Credentials:
        if self._creds is None:
            self._creds = credentials(self.profile)
        return self._creds

    def _transport(self, endpoint: str) -> Transport:
        if endpoint not in self._transports:
            context = tls.context(self.profile.settings.cert_bundle) if endpoint.startswith("https:") else None
            try:
                self._transports[endpoint] = Transport(endpoint, self.creds.signer, context, self.API_VERSION)
            except ValueError as exc:
                raise ConfigError(f"profile {self.profile.name!r}: {exc}.") from None
            self._transports[endpoint].reconnecting = self.reconnecting
        return self._transports[endpoint]

    def close(self) -> None:
        for t in self._transports.values():
            t.close()

    def emulator_clock(self) -> int | None:
        """GET /_emulator/clock at the profile's endpoint: the emulator's test clock (ms), or None for an answer
        without one. One try, no retry (ops/testclock.py asks it only of an endpoint known to be an emulator in test
        mode). NotFound: no test clock there (not in test mode); OSError or HTTPException when nothing answers."""
        endpoint = self.admin_url
        context = tls.context(self.profile.settings.cert_bundle) if endpoint.startswith("https:") else None
        transport = Transport(endpoint, self.creds.signer, context, version="")
        try:
            answer = transport.request("GET", "/_emulator/clock", timeout=EMULATOR_CLOCK_TIMEOUT_S)
        finally:
            transport.close()
        if answer.status == 404:
            raise NotFound("no test clock at this endpoint", status=404, code="NotFound", request_id=None)
        try:
            now = answer.json().get("nowMs") if answer.status == 200 else None
        except (ValueError, AttributeError):
            return None
        return now if isinstance(now, int) else None

    @property
    def admin_url(self) -> str:
        return str(self.profile.settings.endpoint or streaming_endpoint(self.creds.region))

    def messages_url(self, stream: StreamInfo) -> str:
        return str(self.profile.settings.endpoint or stream.messages_endpoint)

    def request(
        self,
        operation: str,
        endpoint: str,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        *,
        sign_body: bool = True,
        retry: bool = True,
        patient: Callable[[OcigroupError], None] | None = None,
        budget: Hashable | None = None,
        per_second: int | None = None,
    ) -> Response:
        """One API call with retries on throttling, 5xx and connection failures, within the profile's deadline.

        `patient`: no deadline; transient failures are retried until the service answers, and the callback hears
        of the first one (of 429s, only once they outlast the profile's deadline): a consumer waits an outage out,
        and the one retry loop is this one. `budget`: the service's
        rate this call counts against; each attempt waits its turn in it first (client/pacing.py)."""
        deadline = backoff.Deadline(self.clock, math.inf if patient else float(self.profile.settings.deadline_s))
        transport = self._transport(endpoint)
        ends = deadline.start + deadline.seconds
        self.waiting = Waiting(operation, 1, deadline.start, ends)
        patience_s, told = float(self.profile.settings.deadline_s), False
        try:
            attempt = 1
            while True:
                if budget is not None:
                    self.pacer.wait_turn(budget, per_second)
                outcome = self._attempt(operation, transport, method, path, query, body, sign_body, deadline)
                if isinstance(outcome, Response):
                    return outcome
                failure, wait_hint = outcome
                if not (retry and isinstance(failure, TransientError)):
                    raise failure
                wait = backoff.delay(attempt, self.rng, wait_hint)
                if (wait_hint or 0) > deadline.remaining() or deadline.remaining() < backoff.LAST_ATTEMPT_S + 0.01:
                    failure.message += f" Gave up after {attempt} attempt(s) in {deadline.elapsed():.1f} s."
                    raise failure
                if patient and not told and (not isinstance(failure, Throttled) or deadline.elapsed() > patience_s):
                    told = True  # a 429 is the service's pace, not an outage: told only when it lasts
                    patient(failure)
                attempt += 1
                self.waiting = Waiting(operation, attempt, deadline.start, ends, failure.message)
                self.clock.sleep(min(wait, deadline.remaining() - backoff.LAST_ATTEMPT_S))  # a last try before the end
        finally:
            self.waiting = None

    def _attempt(
        self,
        operation: str,
        transport: Transport,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        body: Any,
        sign_body: bool,
        deadline: backoff.Deadline,
    ) -> Response | tuple[OcigroupError, float | None]:
        """One try: the answer, or the failure it means with the wait the service asked for (Retry-After)."""
        timeout = max(0.1, min(60.0, deadline.remaining()))
        limit = ANSWER_BYTES.get(operation, MAX_ANSWER_BYTES)
        try:
            resp = transport.request(method, path, query, body, sign_body=sign_body, timeout=timeout, max_bytes=limit)
        except TooLarge as exc:
            return BadAnswer(
                f"{operation}: {transport.endpoint} answered with {exc}, more than the service ever sends for it "
                f"({limit >> 20} MiB): not the service's answer.",
                "is the endpoint right, and is something (a proxy) answering in its place?",
            ), None
        except (OSError, http.client.HTTPException) as exc:
            failure = connection_failure(operation, transport.endpoint, transport.proxy, exc)
            if self.trace:
                self.trace(f"{operation}: {failure.message}")
            return failure, None
        resp.operation, resp.endpoint = operation, transport.endpoint
        rid = resp.headers.get("opc-request-id")
        if self.trace:
            self.trace(f"{operation}: {resp.status} (opc-request-id {rid})")
        told = resp.headers.get(TEST_CLOCK_HEADER)
        if told is not None and told.isdigit() and self.on_service_time is not None:
            self.on_service_time(int(told))
        if 200 <= resp.status < 300:
            try:
                resp.json()  # parsed once, here: an answer that is not JSON is the endpoint's fault
            except BadAnswer as exc:
                return exc, None
            return resp
        if transport.proxy is not None and rid is None and resp.status in PROXY_ANSWERS:  # plain HTTP, proxied
            return proxy_refusal(operation, transport.endpoint, transport.proxy, resp.status), None
        try:
            err = resp.json()
        except BadAnswer:  # an error page that is not the service's JSON: its text, as it came
            err = None
        if isinstance(err, dict):  # the service's words fit a line: a server's 10 MB of them are cut
            code, message = str(err.get("code") or "")[:100] or None, _cut(str(err.get("message", "")), 1000)
        else:
            code, message = None, resp.body.decode("utf-8", "replace")[:200]
        failure = service_failure(operation, resp.status, code, message, rid, bool(query and "cursor" in query))
        return failure, retry_after(resp.headers, message)


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else f"{text[:most]}… ({len(text):,} characters)"
