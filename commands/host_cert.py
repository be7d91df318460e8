"""The key a host presents in the SSH handshake, and OpenSSH 9.2's checks of a host certificate.

``Presented.parse`` reads the server's host key blob (asyncssh verifies a certificate's CA
signature); ``cert_failure`` is sshkey.c ``sshkey_cert_check_host``: a host certificate, within
its dates, naming the host among its principals (or naming none), without critical options, and
signed with an algorithm of OpenSSH's default CASignatureAlgorithms.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace

import asyncssh
from asyncssh.public_key import SSHOpenSSHCertificate, decode_ssh_certificate, decode_ssh_public_key

from commands.frozen import Frozen
from commands.known_hosts_file import KEY_TYPES

# myproposal.h SSH_ALLOWED_CA_SIGALGS: what a host CA may sign with (not ssh-rsa, which is SHA-1).
CA_SIGNATURE_ALGS = frozenset({
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com", "rsa-sha2-512", "rsa-sha2-256"})
HOST_CERT = 2  # SSH2_CERT_TYPE_HOST
KEY_FIELDS = {"ed25519": 1, "sk-ed25519": 2, "ecdsa": 2, "sk-ecdsa": 3, "rsa": 2, "dsa": 4}  # strings after the nonce


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise ValueError("certificate cut short")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def string(self) -> bytes:
        return self.take(int.from_bytes(self.take(4), "big"))

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class CertFields(Frozen):
    """The fields of an OpenSSH certificate that sshkey_cert_check_host reads."""

    cert_type: int
    principals: tuple[bytes, ...]
    valid_after: int
    valid_before: int
    critical: bytes
    signature_alg: str


def cert_fields(blob: bytes) -> CertFields:
    reader = _Reader(blob)
    family = KEY_TYPES[reader.string()][0].removesuffix("-cert")
    reader.string()  # nonce
    for _ in range(KEY_FIELDS[family]):
        reader.string()
    reader.uint(8)  # serial
    cert_type = reader.uint(4)
    reader.string()  # key id
    listed = _Reader(reader.string())
    principals = []
    while listed.pos < len(listed.data):
        principals.append(listed.string())
    valid_after, valid_before = reader.uint(8), reader.uint(8)
    critical = reader.string()
    reader.string()  # extensions
    reader.string()  # reserved
    reader.string()  # signature key
    signature_alg = _Reader(reader.string()).string().decode("ascii", "replace")
    return CertFields(cert_type, tuple(principals), valid_after, valid_before, critical, signature_alg)


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class Presented(Frozen):
    """The host key the server sent: a plain key, or a certificate with its key and its CA's."""

    key: asyncssh.SSHKey  # the plain key (a certificate's own key)
    blob_as_sent: bytes
    cert: CertFields | None = None
    signer: asyncssh.SSHKey | None = None

    @classmethod
    def parse(cls, key_data: bytes) -> Presented:
        alg = _Reader(key_data).string() if len(key_data) >= 4 else b""
        if KEY_TYPES.get(alg, ("", ""))[0].endswith("-cert"):
            try:
                cert = decode_ssh_certificate(key_data)
                fields = cert_fields(key_data)
                if not isinstance(cert, SSHOpenSSHCertificate):
                    raise ValueError("not an OpenSSH certificate")
            except (asyncssh.KeyImportError, ValueError, KeyError) as exc:
                raise ValueError(f"a host certificate ({alg.decode('ascii', 'replace')}) that does not decode: "
                                 f"{exc}") from None
            return cls(cert.key, key_data, fields, cert.signing_key)
        try:
            return cls(decode_ssh_public_key(key_data), key_data)
        except asyncssh.KeyImportError as exc:
            raise ValueError(str(exc)) from None

    @property
    def plain_blob(self) -> bytes:
        return bytes(self.key.public_data)

    @property
    def signer_blob(self) -> bytes:
        return bytes(self.signer.public_data) if self.signer is not None else b""

    def without_cert(self) -> Presented:
        """sshconnect.c's downgrade: the certificate's plain key, checked as a plain key."""
        return replace(self, blob_as_sent=self.plain_blob, cert=None, signer=None)

    def fingerprint(self) -> str:
        return str(self.key.get_fingerprint("sha256"))

    def signer_fingerprint(self) -> str:
        return str(self.signer.get_fingerprint("sha256")) if self.signer is not None else "none"

    def key_type(self) -> str:
        family = KEY_TYPES.get(self.plain_blob[4:4 + int.from_bytes(self.plain_blob[:4], "big")], ("key", ""))[0]
        return family.upper()


def _utc(stamp: int) -> str:
    if stamp > 253402300799:
        return "forever"
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cert_failure(presented: Presented, name: str, now: float) -> tuple[str, str] | None:
    """sshkey_cert_check_host(key, name, 0, CASignatureAlgorithms): None when the certificate is good for
    name, else (kind, what is wrong)."""
    cert = presented.cert
    if cert is None:
        return None
    when = int(now)
    if cert.cert_type != HOST_CERT:
        return "bad-certificate", "is not a host certificate"
    if when < cert.valid_after:
        return "not-yet-valid", f"is not valid before {_utc(cert.valid_after)}"
    if when >= cert.valid_before:
        return "expired", f"expired at {_utc(cert.valid_before)}"
    if cert.principals and name.encode("utf-8", "surrogateescape") not in cert.principals:
        shown = ", ".join(p.decode("utf-8", "replace") for p in cert.principals[:8])
        return "principal", f"names {shown}{' …' if len(cert.principals) > 8 else ''}, not {name}"
    if cert.critical:
        return "bad-certificate", "carries critical options, which OpenSSH refuses in a host certificate"
    if cert.signature_alg not in CA_SIGNATURE_ALGS:
        return "bad-certificate", (f"is signed with {cert.signature_alg}, which OpenSSH's default "
                                   "CASignatureAlgorithms refuses")
    return None
