"""Bad input, through the real entry point: each case gives one `error:` line (and at most one `hint:` line) naming
what was wrong and where, the documented exit code, nothing on stdout, no traceback and no crash file.

`<ws>` in a case is the workspace (prepared key and config files), `<tmp>` the test's own directory, `<url>` the
emulator. A `profile` replaces the good profile file; `auth` changes the good profile's auth section.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization

from ocigroup_cli.app import run
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.emulator.server import EmulatorServer
from tests.helpers.service import ApiKey, Sdk, make_key, start_server

USAGE, FAILURE = 2, 1
MIB = 1024 * 1024
PASS_PHRASE = "correct horse battery staple"
COMPARTMENT = "ocid1.compartment.oc1..test"  # the one Sdk.stream uses


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    code: int
    needles: tuple[str, ...] = ()
    profile: str | bytes | None = None
    auth: dict[str, Any] | None = None
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    config: bool = True  # pass --config (the good profile, or `profile`)


def case(id_: str, *args: str, code: int = USAGE, needles: tuple[str, ...] = (), **kw: Any) -> Any:
    return pytest.param(Case(args, code, needles, **kw), id=id_)


def prof(body: str) -> str:
    """A profile file whose only profile `p` (the default) has `body` (YAML at profile level)."""
    return "default: p\nprofiles:\n  p:\n" + "".join(f"    {line}\n" for line in body.splitlines())


GOOD_AUTH = "auth: {key_file: <ws>/key.pem, tenancy: ocid1.tenancy.oc1..t, user: ocid1.user.oc1..u}"
STREAM = f"stream: {{name: orders, compartment: {COMPARTMENT}}}"
OCI_CONFIG = "[DEFAULT]\nuser=ocid1.user.oc1..u\ntenancy=ocid1.tenancy.oc1..t\nkey_file=<ws>/key.pem\n"

PROFILE_FILES = [
    case("yaml-unclosed-bracket", "streams", "show", profile=prof("region: ["), needles=(".yaml:5", "not valid YAML")),
    case("yaml-tab", "streams", "show", profile="profiles:\n\tp: {}\n", needles=(".yaml:2", "'\\t'")),
    case("yaml-unclosed-quote", "streams", "show", profile=prof("region: 'abc"), needles=("not valid YAML",)),
    case(
        "yaml-python-tag",
        "streams",
        "show",
        profile="profiles: !!python/object/apply:os.system ['true']\n",
        needles=(".yaml:1", "tag"),
    ),
    case("yaml-duplicate-key", "streams", "show", profile=prof("region: a\nregion: b"), needles=(":5", "twice")),
    case("yaml-int-key", "streams", "show", profile=prof("1: a"), needles=(":4", "keys must be strings")),
    case("yaml-not-utf8", "streams", "show", profile=b"profiles:\n  p:\n    region: \xff\n", needles=("UTF-8",)),
    case("yaml-too-large", "streams", "show", profile=b"#" * (MIB + 1), needles=("larger than 1,048,576 bytes",)),
    case(
        "yaml-alias-bomb",
        "streams",
        "show",
        profile="a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9)),
        needles=("alias bomb",),
    ),
    case("file-is-a-list", "streams", "show", profile="- a\n- b\n", needles=(":1", "must be a mapping")),
    case("profiles-not-mapping", "streams", "show", profile="profiles: [a]\n", needles=("'profiles' must map",)),
    case(
        "profile-not-mapping",
        "streams",
        "show",
        profile="default: p\nprofiles:\n  p: 5\n",
        needles=(":3", "profile 'p'"),
    ),
    case("section-not-mapping", "streams", "show", profile=prof("group: [1, 2]"), needles=(":4", "'group' must be a")),
    case(
        "unknown-top-key",
        "streams",
        "show",
        profile="proflies:\n  p: {}\n",
        needles=(":1", "unknown key 'proflies'", "did you mean 'profiles'"),
    ),
    case("unknown-key", "streams", "show", profile=prof("regoin: x"), needles=(":4", "did you mean 'region'")),
    case(
        "unknown-key-in-section",
        "streams",
        "show",
        profile=prof("group:\n  nmae: x"),
        needles=(":5", "unknown key 'group.nmae'", "did you mean 'group.name'"),
    ),
    case("unknown-section", "streams", "show", profile=prof("grup: {name: x}"), needles=("did you mean 'group'",)),
    case("type-int", "streams", "show", profile=prof("group: {timeout_ms: soon}"), needles=("must be an integer",)),
    case("type-number", "streams", "show", profile=prof("deadline_s: fast"), needles=(":4", "must be a number")),
    case("type-bool", "streams", "show", profile=prof("group: {commit_on_get: maybe}"), needles=("true or false",)),
    case("type-str", "streams", "show", profile=prof("group: {name: 123}"), needles=("'group.name' must be a str",)),
    case("type-bool-for-int", "streams", "show", profile=prof("group: {timeout_ms: true}"), needles=("integer",)),
    case("type-date-for-str", "streams", "show", profile=prof("region: 2024-01-01"), needles=("'region' must be",)),
    case("type-mapping-for-str", "streams", "show", profile=prof("endpoint: {a: b}"), needles=("'endpoint' must",)),
    case("below-minimum", "streams", "show", profile=prof("deadline_s: 0"), needles=("at least 1",)),
    case("below-minimum-ms", "streams", "show", profile=prof("group: {timeout_ms: 500}"), needles=("at least 1000",)),
    case("not-finite", "streams", "show", profile=prof("deadline_s: .nan"), needles=("finite number",)),
    case("choice-auth", "streams", "show", profile=prof("auth: {method: password}"), needles=("api_key",)),
    case("choice-export", "streams", "show", profile=prof("export: {format: xml}"), needles=("parquet",)),
    case("ocid-stream", "streams", "show", profile=prof("stream: {id: orders}"), needles=("ocid1.stream",)),
    case("ocid-wrong-kind", "streams", "show", profile=prof("auth: {tenancy: ocid1.user.oc1..x}"), needles=("ten",)),
    case("ocid-compartment", "streams", "show", profile=prof("stream: {compartment: c1}"), needles=("compartment",)),
    case("fingerprint", "streams", "show", profile=prof("auth: {fingerprint: zz}"), needles=("16 pairs",)),
    case("instance-template", "streams", "show", profile=prof("group: {instance: '{host}'}"), needles=("{hostname}",)),
    case("empty-group-name", "streams", "show", profile=prof("group: {name: ''}"), needles=("non-empty",)),
    case("no-such-profile", "--profile", "staging", "streams", "show", needles=("'staging' is not defined", "test")),
    case("default-names-no-profile", "streams", "show", profile="default: ghost\nprofiles: {}\n", needles=("ghost",)),
    case("empty-file", "--profile", "p", "streams", "show", profile="", needles=("defines no profiles",)),
    case("config-missing", "--config", "<tmp>/nope.yaml", "streams", "show", needles=("nope.yaml: no such file",)),
    case("config-is-a-directory", "--config", "<tmp>", "streams", "show", needles=("a directory, not a regular file",)),
    case(
        "env-config-missing",
        "streams",
        "show",
        config=False,
        env={"OCIGROUP_CONFIG": "<tmp>/gone.yaml"},
        needles=("gone.yaml: no such file",),
    ),
    case(
        "env-int", "streams", "show", env={"OCIGROUP_GROUP_TIMEOUT_MS": "abc"}, needles=("OCIGROUP_GROUP_TIMEOUT_MS",)
    ),
    case("env-bool", "streams", "show", env={"OCIGROUP_GROUP_COMMIT_ON_GET": "perhaps"}, needles=("true or false",)),
    case("env-infinite", "streams", "show", env={"OCIGROUP_DEADLINE_S": "inf"}, needles=("finite",)),
    case("env-local-port", "-p", "local", "streams", "show", env={"OCIGROUP_LOCAL_PORT": "99999"}, needles=("65535",)),
    case("validate-missing", "profile", "validate", "<tmp>/nope.yaml", config=False, needles=("no such file",)),
]

MISSING_FIELDS = [
    case(
        "no-group-name",
        "tail",
        profile=prof(f"endpoint: <url>\n{GOOD_AUTH}\n{STREAM}"),
        needles=("no group.name", "GROUP"),
    ),
    case("no-stream", "streams", "show", profile=prof(f"endpoint: <url>\n{GOOD_AUTH}"), needles=("names no stream",)),
    case("no-key-file", "streams", "show", auth={"key_file": None}, needles=("no auth.key_file",)),
    case("no-tenancy", "streams", "show", auth={"tenancy": None}, needles=("no auth.tenancy",)),
    case("no-user", "streams", "show", auth={"user": None}, needles=("no auth.user",)),
    case(
        "no-compartment",
        "streams",
        "list",
        profile=prof(f"endpoint: <url>\n{GOOD_AUTH}\nstream: {{id: ocid1.stream.oc1..s}}"),
        needles=("no stream.compartment",),
    ),
    case("endpoint-not-url", "--endpoint", "notaurl", "streams", "show", needles=("'notaurl' must be an http",)),
    case(
        "endpoint-ftp",
        "streams",
        "show",
        profile=prof(f"endpoint: ftp://x\n{GOOD_AUTH}\n{STREAM}"),
        needles=("ftp://x",),
    ),
]

KEY_FILES = [
    case("key-missing", "streams", "show", auth={"key_file": "<ws>/nope.pem"}, needles=("nope.pem: no such file",)),
    case("key-is-a-directory", "streams", "show", auth={"key_file": "<ws>"}, needles=("a directory, not a regular",)),
    case("key-garbage", "streams", "show", auth={"key_file": "<ws>/garbage.pem"}, needles=("not a PEM private key",)),
    case("key-empty", "streams", "show", auth={"key_file": "<ws>/empty.pem"}, needles=("empty.pem", "not a PEM")),
    case("key-public", "streams", "show", auth={"key_file": "<ws>/key_public.pem"}, needles=("this is a public key",)),
    case(
        "key-encrypted-no-pass",
        "streams",
        "show",
        auth={"key_file": "<ws>/encrypted.pem"},
        needles=("encrypted.pem: the key is encrypted", "auth.pass_phrase_env"),
    ),
    case(
        "key-encrypted-pass-env-unset",
        "streams",
        "show",
        auth={"key_file": "<ws>/encrypted.pem", "pass_phrase_env": "TEST_PASS_UNSET"},
        needles=("encrypted", "TEST_PASS_UNSET, which is unset"),
    ),
    case(
        "key-encrypted-wrong-pass",
        "streams",
        "show",
        auth={"key_file": "<ws>/encrypted.pem", "pass_phrase_env": "TEST_PASS"},
        env={"TEST_PASS": "wrong"},
        needles=("pass phrase is wrong",),
    ),
    case(
        "key-not-trusted",
        "streams",
        "show",
        auth={"key_file": "<ws>/stranger/key.pem"},
        code=FAILURE,
        needles=(
            "401 NotAuthenticated",
            "opc-request-id",
            "hint: the service does not know the key that signed",
            "`ocigroup doctor` checks which",
        ),
    ),
    case(
        "key-wrong-fingerprint",
        "streams",
        "show",
        auth={"fingerprint": ":".join(["ab"] * 16)},
        code=FAILURE,
        needles=("401", "ab:ab:ab"),
    ),
    case(
        "oci-config-missing",
        "streams",
        "show",
        auth={"method": "oci_config", "config_file": "<ws>/no-oci-config"},
        needles=("no-oci-config: no such file", "oci setup config"),
    ),
    case(
        "oci-config-garbage",
        "streams",
        "show",
        auth={"method": "oci_config", "config_file": "<ws>/garbage.pem"},
        needles=("garbage.pem:1: not a valid OCI config file",),
    ),
    case(
        "oci-config-no-section",
        "streams",
        "show",
        auth={"method": "oci_config", "config_file": "<ws>/oci-config", "config_profile": "X"},
        needles=("no profile [X]",),
    ),
    case(
        "oci-config-no-key-file",
        "streams",
        "show",
        auth={"method": "oci_config", "config_file": "<ws>/oci-config-no-key"},
        needles=("'key_file' is missing",),
    ),
    case(
        "oci-config-key-missing",
        "streams",
        "show",
        auth={"method": "oci_config", "config_file": "<ws>/oci-config-bad-key"},
        needles=("key_file in the OCI config", "gone.pem: no such file"),
    ),
    case(
        "oci-config-encrypted-key",
        "streams",
        "show",
        auth={"method": "oci_config", "config_file": "<ws>/oci-config-encrypted"},
        needles=("encrypted", "add pass_phrase"),
    ),
    case(
        "security-token-no-token-file",
        "streams",
        "show",
        auth={"method": "security_token", "config_file": "<ws>/oci-config"},
        needles=("oci-config [DEFAULT]: 'security_token_file' is missing",),
    ),
    case(
        "security-token-file-missing",
        "streams",
        "show",
        auth={"method": "security_token", "config_file": "<ws>/oci-config-token"},
        needles=("security_token_file", "no-token: no such file"),
    ),
]

FLAGS = [
    # streams and OCIDs
    case("stream-bad-ocid", "--stream", "ocid1.stream.bad", "streams", "show", needles=("--stream", "OCID")),
    case("stream-no-such-name", "--stream", "nosuch", "streams", "show", code=FAILURE, needles=("'nosuch'",)),
    case(
        "stream-no-such-ocid",
        "--stream",
        "ocid1.stream.oc1..gone",
        "streams",
        "show",
        code=FAILURE,
        needles=("GetStream failed: 404", "opc-request-id"),
    ),
    # times
    case("from-garbage", "tail", "--from", "garbage", needles=("--from: 'garbage' is not a time", "accepted:")),
    case("from-bad-date", "tail", "--from", "2024-13-45", needles=("'2024-13-45' is not a time",)),
    case("time-garbage", "cursor", "create", "-t", "AT_TIME", "--time", "soonish", needles=("--time: 'soonish'",)),
    case("at-time-without-time", "cursor", "create", "--type", "AT_TIME", needles=("needs --time",)),
    case("time-without-at-time", "cursor", "create", "--time", "1h", needles=("--time goes with --type AT_TIME",)),
    case("reset-to-garbage", "reset", "--to", "someday", needles=("'someday' is not a time",)),
    case("reset-by-garbage", "reset", "--by-duration", "forever", needles=("'forever' is not a duration",)),
    case("reset-no-target", "reset", needles=("exactly one of --to",)),
    case("reset-two-targets", "reset", "--to", "latest", "--by-duration", "1h", needles=("exactly one of",)),
    case("reset-dry-run-and-execute", "reset", "--to", "latest", "--dry-run", "--execute", needles=("exclude",)),
    case("inspect-interval", "inspect", "--interval", "soon", needles=("'soon' is not a duration",)),
    case("inspect-time-lag", "inspect", "--fail-on-time-lag", "abc", needles=("'abc' is not a duration",)),
    # partitions and offsets
    case("partition-too-big", "cursor", "create", "--partition", "9", needles=("--partition 9", "0 to 3")),
    case("partition-negative", "cursor", "create", "--partition", "-1", needles=("'--partition'", "x>=0")),
    case("partition-not-int", "cursor", "create", "--partition", "abc", needles=("'--partition'", "'abc'")),
    case(
        "offset-negative",
        "cursor",
        "create",
        "-t",
        "AT_OFFSET",
        "--partition",
        "0",
        "--offset",
        "-5",
        needles=("'--offset'",),
    ),
    case("offset-without-partition", "cursor", "create", "--type", "AT_OFFSET", needles=("--partition and --offset",)),
    case("offset-without-type", "cursor", "create", "--offset", "5", needles=("--offset goes with",)),
    case(
        "offset-beyond-the-log",
        "cursor",
        "create",
        "--type",
        "AT_OFFSET",
        "--partition",
        "0",
        "--offset",
        "999999",
        code=FAILURE,
        needles=("CreateCursor failed: 400", "999999"),
    ),
    case("cursor-type", "cursor", "create", "--type", "BOGUS", needles=("--type must be one of",)),
    case(
        "group-type-needs-partition",
        "cursor",
        "create",
        "-t",
        "AFTER_OFFSET",
        "--offset",
        "1",
        needles=("--partition",),
    ),
    # group and instance names
    case("tail-empty-group", "tail", "", needles=("'group.name' must be a non-empty name",)),
    case("inspect-empty-group", "inspect", "", needles=("non-empty",)),
    case("empty-instance", "tail", "--instance", "", needles=("'group.instance'", "non-empty")),
    case("instance-bad-template", "tail", "--instance", "{host}", needles=("--instance", "{hostname}")),
    case(
        "group-name-too-long",
        "cursor",
        "create",
        "g" * 2000,
        code=FAILURE,
        needles=("CreateGroupCursor failed: 400", "groupName"),
    ),
    case("inspect-no-such-group", "inspect", "nosuch", code=FAILURE, needles=("group 'nosuch' does not exist",)),
    case(
        "reset-no-such-group",
        "reset",
        "nosuch",
        "--to",
        "earliest",
        code=FAILURE,
        needles=("group 'nosuch' does not exist",),
    ),
    case("peek-no-such-group", "tail", "nosuch", "--peek", code=FAILURE, needles=("group 'nosuch' does not exist",)),
    # limits
    case("max-messages-zero", "tail", "-n", "0", needles=("'--max-messages'", "x>=1")),
    case("max-messages-text", "tail", "-n", "abc", needles=("'--max-messages'", "'abc'")),
    case("batch-limit-zero", "tail", "--batch-limit", "0", needles=("'--batch-limit'",)),
    case("batch-limit-huge", "tail", "--batch-limit", "10001", needles=("1<=x<=10000",)),
    case("lag-cap-zero", "inspect", "--lag-cap", "0", needles=("'--lag-cap'",)),
    case("lag-cap-huge", "inspect", "--lag-cap", "10001", needles=("'--lag-cap'",)),
    case("fail-on-lag-negative", "inspect", "--fail-on-lag", "-1", needles=("'--fail-on-lag'",)),
    case("iterations-zero", "inspect", "--iterations", "0", needles=("'--iterations'",)),
    case("timeout-ms-small", "cursor", "create", "--timeout-ms", "10", needles=("'--timeout-ms'", "x>=1000")),
    case("partitions-zero", "streams", "create", "x", "--partitions", "0", needles=("'--partitions'",)),
    case("partitions-huge", "streams", "create", "x", "--partitions", "201", needles=("1<=x<=200",)),
    case("retention-short", "streams", "create", "x", "--retention-hours", "10", needles=("24<=x<=168",)),
    case("stream-empty-name", "streams", "create", "", code=FAILURE, needles=("'name' must not be empty",)),
    # output formats
    case("output-global", "-o", "xml", "streams", "show", needles=("--output must be table, json or yaml",)),
    case("output-command", "streams", "list", "-o", "xml", needles=("not 'xml'",)),
    case("tail-format", "tail", "--format", "xml", needles=("--format must be one of",)),
    case("tail-encoding", "tail", "--encoding", "latin1", needles=("--encoding must be one of",)),
    case("template-without-format", "tail", "--template", "{value}", needles=("--template goes with",)),
    case("format-without-template", "tail", "--format", "template", needles=("--template goes with",)),
    case("template-unknown-field", "tail", "-f", "template", "--template", "{nope}", needles=("unknown field 'nope'",)),
    case("template-attribute", "tail", "-f", "template", "--template", "{partition.x}", needles=("attribute 'x'",)),
    case("template-index", "tail", "-f", "template", "--template", "{partition[0]}", needles=("not subscriptable",)),
    case("template-brace", "tail", "-f", "template", "--template", "{", needles=("Single '{'",)),
    # unknown commands and options
    case("unknown-command", "publishh", needles=("No such command 'publishh'", "Did you mean 'publish'")),
    case("unknown-global-option", "--foo", "streams", "show", needles=("No such option: --foo", "hint: see 'ocigroup")),
    case("unknown-option", "tail", "--bogus", needles=("No such option: --bogus", "see 'ocigroup tail --help'")),
    case("unknown-subcommand", "streams", "delete", "x", needles=("No such command 'delete'",)),
    case("missing-argument", "streams", "create", needles=("Missing argument",)),
    case("extra-argument", "cursor", "create", "a", "b", needles=("unexpected extra argument",)),
    case("option-without-value", "-p", needles=("'-p' requires an argument",)),
    # the emulator's own flags
    case("serve-port", "emulator", "serve", "--port", "70000", needles=("'--port'",)),
    case("serve-trusted-key-missing", "emulator", "serve", "--trusted-key", "<ws>/nope.pem", needles=("nope.pem",)),
    case("serve-trusted-key-garbage", "emulator", "serve", "--trusted-key", "<ws>/garbage.pem", needles=("RSA key",)),
    case("serve-faults", "emulator", "serve", "--faults", "bogus", needles=("--faults: unknown fault 'bogus'",)),
    case("serve-fault-rate", "emulator", "serve", "--faults", "429=2", needles=("between 0 and 1",)),
    case("serve-latency", "emulator", "serve", "--latency-ms", "-1", needles=("'--latency-ms'",)),
    case("serve-data-not-db", "emulator", "serve", "--port", "0", "--data", "<ws>/garbage.pem", needles=("--data",)),
    case(
        "serve-data-no-dir", "emulator", "serve", "--port", "0", "--data", "<ws>/garbage.pem/x.db", needles=("--data",)
    ),
    case("start-port", "emulator", "start", "--port", "0", needles=("'--port'", "1<=x<=65535")),
]

PUBLISH = [
    case("publish-nothing", "publish", stdin=b"", needles=("nothing to publish",)),
    case("json-line-not-json", "publish", "--json-lines", stdin=b'{"value": "ok"}\nnot json\n', needles=("line 2",)),
    case("json-line-key-type", "publish", "--json-lines", stdin=b'{"key": 5, "value": "x"}\n', needles=("'key'",)),
    case("json-line-array", "publish", "--json-lines", stdin=b"[1, 2]\n", needles=("needs a string 'value'",)),
    case("json-line-surrogate", "publish", "--json-lines", stdin=b'{"value": "\\ud800"}\n', needles=("line 1",)),
    case("stdin-not-utf8", "publish", stdin=b"ok\n\xff\xfe\n", needles=("stdin is not UTF-8",)),
    case("value-over-1mib", "publish", stdin=b"x" * (MIB + 1), needles=("message 1", "1048577 bytes", "1048576")),
    case("key-over-256", "publish", "--key", "k" * 257, "v", needles=("message 1: its key is 257 bytes",)),
    case(
        "second-message-too-big",
        "publish",
        "--json-lines",
        stdin=b'{"value": "small"}\n{"value": "' + b"y" * (MIB + 10) + b'"}\n',
        needles=("message 2", "Nothing was published"),
    ),
]

CORPUS = PROFILE_FILES + MISSING_FIELDS + KEY_FILES + FLAGS + PUBLISH


def test_the_corpus_is_large_and_distinct():
    cases = [p.values[0] for p in CORPUS]
    assert len(CORPUS) >= 60 and len({p.id for p in CORPUS}) == len(CORPUS)
    assert len({(c.args, c.profile, repr(c.auth), repr(c.env), c.stdin) for c in cases}) == len(cases)


@pytest.fixture(scope="module")
def trusted(tmp_path_factory) -> ApiKey:
    """The workspace: key.pem (0600) and key_public.pem, trusted by the emulator, and bad keys and OCI config files
    beside them; made once."""
    key = make_key(tmp_path_factory.mktemp("ws"))
    d = Path(key.key_file).parent
    (d / "stranger").mkdir()
    make_key(d / "stranger")
    encrypted = key.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(PASS_PHRASE.encode()),
    )
    files = {
        "encrypted.pem": encrypted,
        "garbage.pem": b"hello, not a key\n",
        "empty.pem": b"",
        "oci-config": OCI_CONFIG.encode(),
        "oci-config-no-key": b"[DEFAULT]\nuser=ocid1.user.oc1..u\ntenancy=ocid1.tenancy.oc1..t\n",
        "oci-config-bad-key": OCI_CONFIG.replace("key.pem", "gone.pem").encode(),
        "oci-config-encrypted": OCI_CONFIG.replace("key.pem", "encrypted.pem").encode(),
        "oci-config-token": (OCI_CONFIG + "security_token_file=<ws>/no-token\n").encode(),
    }
    for name, data in files.items():
        path = d / name
        path.write_bytes(data.replace(b"<ws>", str(d).encode()))
        path.chmod(0o600)
    return key


@pytest.fixture(scope="module")
def ws(trusted) -> Path:
    return Path(trusted.key_file).parent


@pytest.fixture(scope="module")
def server(trusted):
    """One emulator for the module, with the stream `orders` (4 partitions) the good profile names."""
    emulator = start_server(trusted, SystemClock())  # real time: the service's rates count real seconds
    Sdk(emulator, trusted).stream(partitions=4, name="orders")
    yield emulator
    emulator.stop()


def good_profile(ws: Path, url: str, directory: Path, auth: dict[str, Any] | None = None) -> str:
    settings = {
        "endpoint": url,
        "deadline_s": 2,
        "auth": {"key_file": str(ws / "key.pem"), "tenancy": "ocid1.tenancy.oc1..t", "user": "ocid1.user.oc1..u"},
        "stream": {"name": "orders", "compartment": COMPARTMENT},
        "group": {"name": "billing"},
    }
    for k, v in (auth or {}).items():
        if v is None:
            settings["auth"].pop(k)
        else:
            settings["auth"][k] = v
    path = directory / "ocigroup.yaml"
    path.write_text(yaml.safe_dump({"default": "test", "profiles": {"test": settings}}))
    return str(path)


def expand(text: str, ws: Path, tmp: Path, url: str) -> str:
    return text.replace("<ws>", str(ws)).replace("<tmp>", str(tmp)).replace("<url>", url)


def assert_one_clear_error(code: int, out: str, err: str, expected: Case | int, needles: tuple[str, ...] = ()) -> None:
    want = expected.code if isinstance(expected, Case) else expected
    assert code == want, err
    assert out == "", out
    lines = err.splitlines()
    if len(lines) == 3:  # a command to run, on a line of its own after the hint
        assert lines[2].startswith("  ocigroup "), err
        lines = lines[:2]
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), err
    assert len(lines) == 1 or lines[1].startswith("hint: "), err
    for needle in needles:
        assert needle in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert not (Path(os.environ["OCIGROUP_STATE_DIR"]) / "crash.log").exists()


@pytest.mark.parametrize("c", CORPUS)
def test_bad_input_gives_one_clear_line(c: Case, ws, server, tmp_path, capsys, monkeypatch):
    for name, value in c.env.items():
        monkeypatch.setenv(name, expand(value, ws, tmp_path, server.url))
    if c.stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(c.stdin), encoding="utf-8"))
    args = [expand(a, ws, tmp_path, server.url) for a in c.args]
    if c.config and "--config" not in args:
        if c.profile is None:
            config = good_profile(ws, server.url, tmp_path, expand_auth(c.auth, ws))
        else:
            config = str(tmp_path / "case.yaml")
            data = c.profile if isinstance(c.profile, bytes) else expand(c.profile, ws, tmp_path, server.url).encode()
            Path(config).write_bytes(data)
        args = ["--config", config, *args]
    if args[0] == "emulator":  # a case that starts serving would wait for a signal: fail instead
        monkeypatch.setattr(EmulatorServer, "start", lambda self: pytest.fail("the emulator started"))
    capsys.readouterr()
    code = run(args)
    captured = capsys.readouterr()
    needles = tuple(expand(n, ws, tmp_path, server.url) for n in c.needles)
    assert_one_clear_error(code, captured.out, captured.err, c, needles)


def expand_auth(auth: dict[str, Any] | None, ws: Path) -> dict[str, Any] | None:
    if auth is None:
        return None
    return {k: v.replace("<ws>", str(ws)) if isinstance(v, str) else v for k, v in auth.items()}


def test_an_oversized_message_publishes_nothing(ws, server, tmp_path, capsys):
    config = good_profile(ws, server.url, tmp_path)
    code = run(["--config", config, "publish", "first", "x" * 100_000, "--key", "k" * 300])
    assert_one_clear_error(code, *capsys.readouterr(), USAGE, ("message 1: its key is 300 bytes",))
    code = run(["--config", config, "tail", "nobody-yet", "--instance", "i", "-e", "-f", "json"])
    assert code == 0 and capsys.readouterr().out == ""  # the stream is still empty


def console_script() -> str:
    script = Path(sys.executable).with_name("ocigroup")
    assert script.exists(), "the package is installed with its console script"
    return str(script)


SUBPROCESS_CASES = [
    (["--foo"], None, ("No such option: --foo",)),
    (["--config", "<tmp>/bad.yaml", "streams", "show"], None, ("bad.yaml:4", "not valid YAML")),
    (["--config", "<tmp>/nokey.yaml", "streams", "show"], None, ("missing.pem: no such file",)),
    (["tail", "-f", "template", "--template", "{partition[0]}"], None, ("not subscriptable",)),
    (["publish", "--json-lines"], b'{"value": "ok"}\n{"value": 1}\n', ("input line 2",)),
    (["publish"], b"z" * (MIB + 1) + b"\n", ("1048577 bytes",)),
    # the words of kafka-consumer-groups, rpk and kcat get ocigroup's
    (
        ["describe", "billing"],
        None,
        ("No such command 'describe'", "hint: the group's owners", "ocigroup inspect GROUP"),
    ),
    (["inspect", "--group", "billing"], None, ("an argument, not an option: e.g. ocigroup inspect billing",)),
    (["tail", "--group", "billing"], None, ("an argument, not an option: e.g. ocigroup tail billing",)),
    (["reset", "billing", "--to-earliest"], None, ("hint: --to earliest",)),
]


# ids of their own: pytest 9.1 would make the 1 MiB stdin part of the id, and of PYTEST_CURRENT_TEST, which the
# command then inherits, past what one environment string may be (execve: E2BIG)
@pytest.mark.parametrize(("args", "stdin", "needles"), SUBPROCESS_CASES, ids=[" ".join(c[0]) for c in SUBPROCESS_CASES])
def test_no_traceback_escapes_the_process(args, stdin, needles, tmp_path):
    (tmp_path / "bad.yaml").write_text("profiles:\n  p:\n    region: [\n")
    (tmp_path / "nokey.yaml").write_text(prof(GOOD_AUTH.replace("<ws>/key.pem", f"{tmp_path}/missing.pem")))
    proc = subprocess.run(
        [console_script(), *(a.replace("<tmp>", str(tmp_path)) for a in args)],
        input=stdin or b"",
        capture_output=True,
        timeout=60,
        env={**os.environ, "OCIGROUP_PROFILE": "p"},
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert_one_clear_error(proc.returncode, proc.stdout.decode(), err, USAGE, needles)
