"""Throwaway TLS material for tests: a private CA, a loopback server certificate it signs, and a rogue one.

`make_tls(directory)` writes a CA certificate and a server certificate/key for 127.0.0.1, ::1 and localhost,
so a test can run a real HTTPS server on loopback and have a client verify it against that CA only.
`make_self_signed(directory)` writes a certificate for the same names that the CA did not sign, for tests that
expect verification to fail. Keys are EC P-256: generating them takes about a millisecond.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

TEST_HOST = "streaming.test"  # a name only a test proxy resolves (to loopback): see LoopbackProxy(hosts=...)
_LOOPBACK_NAMES = x509.SubjectAlternativeName(
    [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
        x509.DNSName("localhost"),
        x509.DNSName(TEST_HOST),
    ]
)


@dataclass(frozen=True)
class CertKey:
    """A PEM certificate and its private key, as files."""

    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        """A server-side context presenting this certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


@dataclass(frozen=True)
class TlsFiles:
    """The files `make_tls` wrote: the CA certificate, and the server certificate it signed with its key."""

    ca_cert: Path
    server_cert: Path
    server_key: Path

    @property
    def server(self) -> CertKey:
        return CertKey(self.server_cert, self.server_key)

    def client_context(self) -> ssl.SSLContext:
        """A client-side context that trusts this CA and nothing else, with hostname checks on."""
        return ssl.create_default_context(cafile=self.ca_cert)


def make_tls(directory: Path | str) -> TlsFiles:
    """Write ca.pem, server.pem and server-key.pem into `directory`; the CA's own key is discarded."""
    directory = Path(directory)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("ocigroup test CA")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        _server_builder(server_key.public_key(), issuer=ca_name)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem")
    _write_cert(files.ca_cert, ca_cert)
    _write_cert(files.server_cert, server_cert)
    _write_key(files.server_key, server_key)
    return files


def make_self_signed(directory: Path | str) -> CertKey:
    """Write self-signed.pem and self-signed-key.pem: valid names and dates, but no CA vouches for it."""
    directory = Path(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _server_builder(key.public_key(), issuer=_name("localhost")).sign(key, hashes.SHA256())
    pair = CertKey(directory / "self-signed.pem", directory / "self-signed-key.pem")
    _write_cert(pair.cert, cert)
    _write_key(pair.key, key)
    return pair


def _server_builder(public_key: ec.EllipticCurvePublicKey, issuer: x509.Name) -> x509.CertificateBuilder:
    """A leaf certificate for the loopback names, fit for a TLS server; the caller adds the issuer's key id."""
    return (
        _builder(_name("localhost"), issuer, public_key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_LOOPBACK_NAMES, critical=False)
    )


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    """Subject, issuer, key, a random serial and a validity from a day ago to thirty days ahead."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    """Certificate and CRL signing for a CA; digital signature (ECDHE key exchange) for a server."""
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)
