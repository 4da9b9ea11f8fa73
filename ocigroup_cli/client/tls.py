"""The TLS context for HTTPS endpoints: the system's trusted CAs, or the CA bundle the profile names.

`cert_bundle` comes from the profile (or OCIGROUP_CERT_BUNDLE), else from the variables the `oci` CLI and the
SDK honour (OCI_CLI_CERT_BUNDLE, REQUESTS_CA_BUNDLE); OpenSSL itself honours SSL_CERT_FILE/SSL_CERT_DIR for the
default store. A system without any CA store falls back to certifi's bundle (installed with the SDK).
"""

from __future__ import annotations

import functools
import ssl

from ocigroup_cli.errors import ConfigError

BUNDLE_HINT = (
    "set cert_bundle in the profile (or OCI_CLI_CERT_BUNDLE) to the CA certificate of your network's "
    "TLS inspection, or fix the endpoint"
)


@functools.cache
def context(bundle: str | None) -> ssl.SSLContext:
    """A verifying client context (certificate and host name), built once per bundle and process."""
    try:
        ctx = ssl.create_default_context(cafile=bundle)
    except FileNotFoundError:
        raise ConfigError(f"cert_bundle {bundle}: no such file.", "fix the path, or remove the setting") from None
    except (OSError, ssl.SSLError) as exc:
        problem = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
        raise ConfigError(f"cert_bundle {bundle}: not a PEM file of CA certificates ({problem}).") from None
    if bundle is None and not ctx.cert_store_stats().get("x509_ca"):
        try:
            import certifi

            ctx.load_verify_locations(certifi.where())
        except ImportError:
            pass
    return ctx
