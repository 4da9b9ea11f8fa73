"""Networks as users have them: HTTPS with a CA bundle, a CONNECT proxy (with and without credentials, refusing,
dead), plain HTTP through a proxy, no_proxy, loopback never proxied, and every realm's endpoint.

Everything runs on loopback: the test proxy resolves `streaming.test` to 127.0.0.1 itself, so the client (which
never proxies loopback) sends real CONNECT requests for a name it cannot resolve on its own.
"""

from __future__ import annotations

import time

import pytest

from ocigroup_cli.app import run
from ocigroup_cli.client.regions import streaming_endpoint
from ocigroup_cli.client.transport import proxy_for
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.emulator.shared.options import Options
from tests.helpers.proxy import LoopbackProxy
from tests.helpers.service import Sdk, start_server, write_config
from tests.helpers.tls import TEST_HOST, make_self_signed, make_tls


@pytest.fixture
def tls_files(tmp_path):
    return make_tls(tmp_path)


@pytest.fixture
def https_server(api_key, tls_files):
    server = start_server(
        api_key,
        SystemClock(),
        tls_cert=str(tls_files.server_cert),
        tls_key=str(tls_files.server_key),
        options=Options(transition_ms=0),  # the stream made below is ACTIVE at once
    )
    server.backend.create_stream({"name": "orders", "partitions": 2, "compartmentId": "ocid1.compartment.oc1..test"})
    yield server
    server.stop()


def ocigroup(capsys, config: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(["--config", config, *args])
    out, err = capsys.readouterr()
    return code, out, err


def config_for(tmp_path, api_key, endpoint: str, **extra) -> str:
    return write_config(tmp_path, api_key, endpoint, **{"group__name": "g", "deadline_s": 3, **extra})


def test_https_with_the_profile_cert_bundle(https_server, api_key, tls_files, tmp_path, capsys):
    config = config_for(tmp_path, api_key, https_server.url, cert_bundle=str(tls_files.ca_cert))
    code, out, err = ocigroup(capsys, config, "publish", "over-tls")
    assert code == 0, err
    code, out, err = ocigroup(capsys, config, "tail", "--instance", "a", "-e", "-f", "value")
    assert (code, out) == (0, "over-tls\n"), err


@pytest.mark.parametrize("variable", ["OCI_CLI_CERT_BUNDLE", "REQUESTS_CA_BUNDLE", "OCIGROUP_CERT_BUNDLE"])
def test_cert_bundle_from_the_variables_the_oci_cli_honours(
    variable, https_server, api_key, tls_files, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv(variable, str(tls_files.ca_cert))
    config = config_for(tmp_path, api_key, https_server.url)
    code, _, err = ocigroup(capsys, config, "publish", "x")
    assert code == 0, err
    code, out, _ = ocigroup(capsys, config, "profile", "show", "-o", "json")
    assert f'"env {variable}"' in out


def test_a_certificate_that_does_not_verify_is_one_line_exit_2_and_not_retried(https_server, api_key, tmp_path, capsys):
    config = config_for(tmp_path, api_key, https_server.url)  # no bundle: the test CA is not trusted
    started = time.monotonic()
    code, out, err = ocigroup(capsys, config, "publish", "x")
    assert time.monotonic() - started < 2.0  # the 3 s deadline was not spent retrying
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and "does not verify" in lines[0] and "cert_bundle" in lines[1], err
    assert "Traceback" not in err


def test_a_self_signed_server_fails_even_with_a_bundle(api_key, tmp_path, capsys):
    rogue = make_self_signed(tmp_path)
    server = start_server(api_key, SystemClock(), tls_cert=str(rogue.cert), tls_key=str(rogue.key))
    try:
        config = config_for(tmp_path, api_key, server.url, cert_bundle=str(make_tls(tmp_path).ca_cert))
        code, _, err = ocigroup(capsys, config, "streams", "list")
        assert code == 2 and "does not verify" in err
    finally:
        server.stop()


def test_a_missing_or_broken_cert_bundle_is_a_config_error(https_server, api_key, tmp_path, capsys):
    config = config_for(tmp_path, api_key, https_server.url, cert_bundle=str(tmp_path / "nope.pem"))
    code, _, err = ocigroup(capsys, config, "publish", "x")
    assert code == 2 and "nope.pem: no such file" in err
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    config = config_for(tmp_path, api_key, https_server.url, cert_bundle=str(junk))
    code, _, err = ocigroup(capsys, config, "publish", "x")
    assert code == 2 and "not a PEM file of CA certificates" in err


def test_plain_http_to_an_https_endpoint_and_tls_to_a_plain_one(https_server, api_key, tmp_path, capsys):
    plain = start_server(api_key, SystemClock())
    try:
        config = config_for(tmp_path, api_key, plain.url.replace("http:", "https:"))
        code, _, err = ocigroup(capsys, config, "publish", "x")
        assert code == 2 and "does not answer in TLS" in err and "http://" in err
    finally:
        plain.stop()


def test_https_through_a_connect_proxy(https_server, api_key, tls_files, tmp_path, capsys, monkeypatch):
    with LoopbackProxy(hosts={TEST_HOST: "127.0.0.1"}) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        endpoint = f"https://{TEST_HOST}:{https_server.port}"
        config = config_for(tmp_path, api_key, endpoint, cert_bundle=str(tls_files.ca_cert))
        code, out, err = ocigroup(capsys, config, "publish", "via-proxy")
        assert code == 0, err
        code, out, err = ocigroup(capsys, config, "tail", "--instance", "a", "-e")
        assert (code, out) == (0, "via-proxy\n"), err
    assert ("CONNECT", f"{TEST_HOST}:{https_server.port}") in proxy.requests


def test_plain_http_through_a_proxy_is_signed_in_origin_form(api_key, tmp_path, capsys, monkeypatch):
    server = start_server(api_key, SystemClock())
    try:
        Sdk(server, api_key).stream(partitions=1, name="orders")
        with LoopbackProxy(hosts={TEST_HOST: "127.0.0.1"}) as proxy:
            monkeypatch.setenv("http_proxy", proxy.url)
            config = config_for(tmp_path, api_key, f"http://{TEST_HOST}:{server.port}")
            code, _, err = ocigroup(capsys, config, "publish", "a", "b")
            assert code == 0, err
        assert any(r.method == "POST" and r.target.startswith(f"http://{TEST_HOST}:") for r in proxy.requests)
    finally:
        server.stop()


def test_proxy_credentials(https_server, api_key, tls_files, tmp_path, capsys, monkeypatch):
    endpoint = f"https://{TEST_HOST}:{https_server.port}"
    config = config_for(tmp_path, api_key, endpoint, cert_bundle=str(tls_files.ca_cert))
    with LoopbackProxy(hosts={TEST_HOST: "127.0.0.1"}, credentials=("ops", "s3cret")) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        code, _, err = ocigroup(capsys, config, "publish", "x")
        assert code == 2 and "asks for credentials (407)" in err and "HTTPS_PROXY" in err.upper()
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.replace("http://", "http://ops:s3cret@"))
        code, _, err = ocigroup(capsys, config, "publish", "x")
        assert code == 0, err
        assert "s3cret" not in err


def test_a_refusing_proxy_is_one_line_and_not_retried(https_server, api_key, tls_files, tmp_path, capsys, monkeypatch):
    endpoint = f"https://{TEST_HOST}:{https_server.port}"
    config = config_for(tmp_path, api_key, endpoint, cert_bundle=str(tls_files.ca_cert))
    with LoopbackProxy(refuse_all=True) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        started = time.monotonic()
        code, _, err = ocigroup(capsys, config, "publish", "x")
    assert time.monotonic() - started < 2.0
    assert code == 1 and "refused to connect" in err and "(403)" in err


def test_a_proxy_refusing_plain_http_is_named_not_blamed_on_the_service(api_key, tmp_path, capsys, monkeypatch):
    """To an http:// endpoint the proxy answers itself (no opc-request-id): its 407 and 403 are the proxy's, as
    through an https tunnel, not "GetStream failed: 407" or a refusal by the service."""
    endpoint = f"http://{TEST_HOST}:9"
    config = config_for(tmp_path, api_key, endpoint)
    with LoopbackProxy(hosts={TEST_HOST: "127.0.0.1"}, credentials=("ops", "s3cret")) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        code, _, err = ocigroup(capsys, config, "publish", "x")
        assert code == 2 and f"the proxy {proxy.url} (from http_proxy) asks for credentials (407)" in err, err
    with LoopbackProxy(refuse_all=True) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        started = time.monotonic()
        code, _, err = ocigroup(capsys, config, "publish", "x")
        assert time.monotonic() - started < 2.0
        assert code == 1 and f"refused to connect to {endpoint} (403)" in err and "the service" not in err, err


def test_a_dead_proxy_is_transient_and_named(api_key, tmp_path, capsys, monkeypatch, free_port):
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{free_port}")
    config = config_for(tmp_path, api_key, f"https://{TEST_HOST}:443", deadline_s=1)
    code, _, err = ocigroup(capsys, config, "publish", "x")
    assert code == 4 and f"cannot reach the proxy http://127.0.0.1:{free_port}" in err and "https_proxy" in err


def test_loopback_is_never_proxied(emulator, sdk, api_key, tmp_path, capsys, monkeypatch, free_port):
    sdk.stream(partitions=1, name="orders")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{free_port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    code, _, err = ocigroup(capsys, config_for(tmp_path, api_key, emulator.url), "publish", "direct")
    assert code == 0, err


def test_proxy_choice_follows_curl_conventions(monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("https://streaming.us-ashburn-1.oci.oraclecloud.com") is None
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    chosen = proxy_for("https://streaming.us-ashburn-1.oci.oraclecloud.com")
    assert chosen is not None and (chosen.host, chosen.port, chosen.url) == (
        "proxy.corp",
        3128,
        "http://proxy.corp:3128",
    )
    assert proxy_for("http://cell-1.example.com") is None  # http_proxy is not set
    monkeypatch.setenv("https_proxy", "http://lower.corp:8080")  # the lowercase name wins, as in curl
    assert proxy_for("https://a.example.com").host == "lower.corp"
    monkeypatch.setenv("no_proxy", ".oraclecloud.com,internal.example.com")
    assert proxy_for("https://streaming.us-ashburn-1.oci.oraclecloud.com") is None
    assert proxy_for("https://internal.example.com") is None
    assert proxy_for("https://other.example.com") is not None
    for loopback in ("http://127.0.0.1:18418", "http://localhost:1", "https://[::1]:8443", "http://127.9.9.9"):
        assert proxy_for(loopback) is None
    monkeypatch.setenv("https_proxy", "socks5://s.corp:1080")
    with pytest.raises(ValueError, match="not supported"):
        proxy_for("https://a.example.com")


def test_every_region_the_sdk_knows_gets_the_sdks_endpoint():
    import oci

    template = "https://streaming.{region}.oci.{secondLevelDomain}"
    regions = list(oci.regions.REGION_REALMS) + list(oci.regions.REGIONS_SHORT_NAMES)
    assert len(regions) > 100
    for region in regions:
        expected = oci.regions.endpoint_for("stream", region, service_endpoint_template=template)
        assert streaming_endpoint(region, {}) == expected, region
    assert streaming_endpoint("us-gov-ashburn-1", {}).endswith(".oraclegovcloud.com")
    assert streaming_endpoint("uk-gov-london-1", {}).endswith(".oraclegovcloud.uk")


def test_dedicated_regions_and_typos():
    metadata = '{"realmKey":"OC99","realmDomainComponent":"oc99.example","regionKey":"ZZN","regionIdentifier":"zz-n-1"}'
    env = {"OCI_REGION_METADATA": metadata}
    assert streaming_endpoint("zz-n-1", env) == "https://streaming.zz-n-1.oci.oc99.example"
    assert streaming_endpoint("zzn", env) == "https://streaming.zz-n-1.oci.oc99.example"
    assert streaming_endpoint("zz-x-1", {"OCI_DEFAULT_REALM": "oc77.example"}).endswith(".oci.oc77.example")
    from ocigroup_cli.errors import ConfigError

    with pytest.raises(ConfigError, match="did you mean 'us-ashburn-1'"):
        streaming_endpoint("us-ashburn1", {})
