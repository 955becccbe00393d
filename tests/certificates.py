"""Certificates made at run time for TLS tests (never committed): a CA, a server and a client cert."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    """PEM files in one folder: ``ca``, the server's ``server_cert``/``server_key`` (for
    localhost and 127.0.0.1), a ``client_cert``/``client_key`` signed by ``ca``, and
    ``other_ca``, which signed nothing of these."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def make_pki(folder: Path) -> Pki:
    """Write a fresh CA, server and client certificates (ECDSA P-256, valid one day) to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _authority("gnnstore test CA")
    _, other_cert = _authority("an unrelated CA")
    server_key, server_cert = _leaf(
        "localhost", ca_key, ca_cert, ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key, client_cert = _leaf("trainer-1", ca_key, ca_cert, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    files = {
        "ca": _pem_cert(ca_cert),
        "server_cert": _pem_cert(server_cert),
        "server_key": _pem_key(server_key),
        "client_cert": _pem_cert(client_cert),
        "client_key": _pem_key(client_key),
        "other_ca": _pem_cert(other_cert),
    }
    paths = {}
    for name, data in files.items():
        path = paths[name] = folder / f"{name}.pem"
        path.write_bytes(data)
        path.chmod(0o600)
    return Pki(**paths)


def _authority(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        _builder(subject, subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    name: str,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    usage: x509.ObjectIdentifier,
    alt_names: list[x509.GeneralName],
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _builder(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), ca_cert.subject, key.public_key()
    ).add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
