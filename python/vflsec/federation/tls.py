"""Certificates for mutual TLS between parties.

A federation has one certificate authority (CA). Every party holds a key and
a certificate signed by that CA whose subject common name and DNS subject
alternative name are the party's name. A party's server requires a client
certificate signed by the CA and checks that its common name is the sender
named in each message; a client checks the server's certificate against the
CA and that it was issued to the party it meant to reach (the gRPC target
name is overridden with the party name).

:func:`init_certificates` (``vflsec certs init``) creates a development CA
and party certificates with the ``cryptography`` package: ECDSA P-256 keys,
SHA-256 signatures. In production the CA key should live elsewhere (an HSM
or an offline machine); here it is written next to the certificates,
readable by the owner only.
"""
from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Sequence, cast

from .private_files import write_file

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

__all__ = ["PARTY_NAME_RE", "TLSFiles", "certificate_common_name", "check_party_name", "check_party_tls",
           "init_certificates", "load_tls"]

# Party names double as DNS names in certificates.
PARTY_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,62})$")


def check_party_name(name: str) -> str:
    if not isinstance(name, str) or not PARTY_NAME_RE.match(name):
        raise ValueError(
            f"party name {name!r} must be 1-63 letters, digits or '-', starting with a letter or digit "
            "(it is used as the certificate's DNS name)"
        )
    return name


@dataclass(frozen=True)
class TLSFiles:
    """PEM bytes of the federation CA certificate and this party's
    certificate chain and private key."""

    ca: bytes
    cert: bytes
    key: bytes


def load_tls(ca: os.PathLike, cert: os.PathLike, key: os.PathLike) -> TLSFiles:
    """Read the three PEM files (FileNotFoundError/ValueError naming the file)."""
    out = {}
    for what, path in (("ca", ca), ("cert", cert), ("key", key)):
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"TLS {what} file not found: {path}") from None
        except OSError as exc:  # a folder, no permission, ...
            raise ValueError(f"TLS {what} file {path} cannot be read: {exc.strerror or exc}") from None
        if b"-----BEGIN" not in data:
            raise ValueError(f"TLS {what} file {path} is not PEM")
        out[what] = data
    return TLSFiles(**out)


def _write(path: Path, data: bytes, private: bool) -> None:
    # A random temp name created O_EXCL|O_NOFOLLOW (0600 for keys), renamed
    # into place; a symlink at ``path`` is refused (issue 18 item 7).
    write_file(path, data, private=private)


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "vflsec federation"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _new_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def init_certificates(
    directory: os.PathLike,
    parties: Sequence[str],
    *,
    days: int = 365,
    ca_name: str = "vflsec-dev-ca",
    overwrite: bool = False,
) -> Dict[str, Path]:
    """Create ``ca.pem``/``ca.key`` and ``<party>.pem``/``<party>.key`` for
    every party in ``directory``; returns the paths by name (``"ca"``,
    ``"ca_key"``, ``"<party>"``, ``"<party>_key"``).

    An existing CA in ``directory`` is reused to sign new party certificates
    unless ``overwrite``; an existing party certificate is an error unless
    ``overwrite``.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    parties = [check_party_name(p) for p in parties]
    if not parties:
        raise ValueError("at least one party name is needed")
    if len(set(parties)) != len(parties):
        raise ValueError(f"party names must be distinct, got {parties}")
    if not isinstance(days, int) or days < 1:
        raise ValueError(f"days must be a positive int, got {days!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_pem, ca_key_pem = directory / "ca.pem", directory / "ca.key"
    paths: Dict[str, Path] = {"ca": ca_pem, "ca_key": ca_key_pem}

    if ca_pem.exists() and ca_key_pem.exists() and not overwrite:
        ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
        # cast: the CA key this function wrote before (an EC key): one that can sign certificates.
        ca_key = cast("CertificateIssuerPrivateKeyTypes",
                      serialization.load_pem_private_key(ca_key_pem.read_bytes(), password=None))
    else:
        ca_key = _new_key()
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name(ca_name)).issuer_name(_name(ca_name))
            .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        _write(ca_key_pem, _pem_key(ca_key), private=True)
        _write(ca_pem, ca_cert.public_bytes(serialization.Encoding.PEM), private=False)

    for party in parties:
        cert_path, key_path = directory / f"{party}.pem", directory / f"{party}.key"
        if (cert_path.exists() or key_path.exists()) and not overwrite:
            raise FileExistsError(f"{cert_path} already exists (pass overwrite=True / --force to replace it)")
        key = _new_key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(party)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(party)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        _write(key_path, _pem_key(key), private=True)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False)
        paths[party] = cert_path
        paths[f"{party}_key"] = key_path
    return paths


def certificate_common_name(pem: bytes) -> Optional[str]:
    """The subject common name of a PEM certificate (None if it has none)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_pem_x509_certificate(pem)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else None



def check_party_tls(files: TLSFiles, party: str) -> None:
    """ValueError unless ``files`` can authenticate ``party`` to its peers:
    each PEM parses, the certificate is issued to ``party`` (its common name,
    which the peers check), its issuer is the CA and the CA's signature on it
    verifies, it is valid now, and the private key is the certificate's own.
    Without these the mistake would show only once the peers connect."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    def parse(what: str, load):
        try:
            return load()
        except Exception as exc:  # cryptography raises ValueError or its own errors on bad PEM
            raise ValueError(f"TLS {what} file does not hold a PEM {what}: {' '.join(str(exc).split())}") from None

    ca = parse("ca", lambda: x509.load_pem_x509_certificate(files.ca))
    cert = parse("cert", lambda: x509.load_pem_x509_certificate(files.cert))
    key = parse("key", lambda: serialization.load_pem_private_key(files.key, password=None))
    name = certificate_common_name(files.cert)
    if name != party:
        raise ValueError(f"the TLS certificate is issued to {name!r}, not to this party {party!r}")
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # ValueError (issuer name) or InvalidSignature
        raise ValueError(f"the TLS certificate of {party!r} is not issued by the CA in the ca file") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise ValueError(f"the TLS certificate of {party!r} is valid from {cert.not_valid_before_utc:%Y-%m-%d} "
                         f"to {cert.not_valid_after_utc:%Y-%m-%d}, not now")
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if (key.public_key().public_bytes(serialization.Encoding.PEM, spki)
            != cert.public_key().public_bytes(serialization.Encoding.PEM, spki)):
        raise ValueError(f"the TLS key file does not match the certificate of {party!r} (another party's key?)")
