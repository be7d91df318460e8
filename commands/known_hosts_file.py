"""known_hosts files read line by line as OpenSSH 9.2's hostfile.c and match.c read them (pure, no SSH).

A line is matched on its names first (hashed ``|1|salt|hash`` or comma-separated patterns with
``*``, ``?`` and ``!``), and only a line that names the host has its key decoded: an unparsable
line is skipped, never the whole file, and a bad key on a line for another host is never seen
(both as OpenSSH). Parsed files are cached by (device, inode, mtime, size), so a fleet of hosts
reads each file once per change.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import asyncssh
from asyncssh.public_key import decode_ssh_certificate, decode_ssh_public_key

from commands.frozen import Frozen

MATCHES_KEPT = 4096  # host names whose matching lines a parsed file remembers
MAX_FILE_BYTES = 64 * 1024 * 1024  # far above any real known_hosts; a bigger one is refused, not read
HASH_MAGIC = b"|1|"
_NAMES_END = re.compile(rb"[ \t\0]")
SUBPATTERN_MAX = 1023  # match.c: a subpattern of 1023 characters or more makes the whole list "no match"
MARKERS = {b"@cert-authority": "cert-authority", b"@revoked": "revoked"}
WHITESPACE = b" \t"
B64_SPACE = b" \t\n\r\v\f"  # b64_pton skips these anywhere in the blob
# OpenSSH's key type names (sshkey.c keyimpls, full names only) -> (key type, curve): a line's type
# name must give the same key type as its blob, and for ECDSA the same curve.
KEY_TYPES: dict[bytes, tuple[str, str]] = {
    b"ssh-ed25519": ("ed25519", ""), b"ssh-ed25519-cert-v01@openssh.com": ("ed25519-cert", ""),
    b"sk-ssh-ed25519@openssh.com": ("sk-ed25519", ""),
    b"sk-ssh-ed25519-cert-v01@openssh.com": ("sk-ed25519-cert", ""),
    b"ecdsa-sha2-nistp256": ("ecdsa", "p256"), b"ecdsa-sha2-nistp384": ("ecdsa", "p384"),
    b"ecdsa-sha2-nistp521": ("ecdsa", "p521"),
    b"ecdsa-sha2-nistp256-cert-v01@openssh.com": ("ecdsa-cert", "p256"),
    b"ecdsa-sha2-nistp384-cert-v01@openssh.com": ("ecdsa-cert", "p384"),
    b"ecdsa-sha2-nistp521-cert-v01@openssh.com": ("ecdsa-cert", "p521"),
    b"sk-ecdsa-sha2-nistp256@openssh.com": ("sk-ecdsa", "p256"),
    b"webauthn-sk-ecdsa-sha2-nistp256@openssh.com": ("sk-ecdsa", "p256"),
    b"sk-ecdsa-sha2-nistp256-cert-v01@openssh.com": ("sk-ecdsa-cert", "p256"),
    b"ssh-rsa": ("rsa", ""), b"rsa-sha2-256": ("rsa", ""), b"rsa-sha2-512": ("rsa", ""),
    b"ssh-rsa-cert-v01@openssh.com": ("rsa-cert", ""), b"rsa-sha2-256-cert-v01@openssh.com": ("rsa-cert", ""),
    b"rsa-sha2-512-cert-v01@openssh.com": ("rsa-cert", ""),
    b"ssh-dss": ("dsa", ""), b"ssh-dss-cert-v01@openssh.com": ("dsa-cert", ""),
}


def ascii_lower(text: bytes) -> bytes:
    """OpenSSH's lowercase()/tolower: ASCII letters only (bytes past 0x7f are not letters in its locales)."""
    return text.translate(_LOWER)


_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")


def match_pattern(string: bytes, pattern: bytes) -> bool:
    """match.c match_pattern: ``*`` any run of bytes, ``?`` one byte, everything else itself."""
    s = p = 0
    star_p = star_s = -1
    while s < len(string):
        if p < len(pattern) and pattern[p] == 0x2A:  # '*'
            star_p, star_s = p, s
            p += 1
        elif p < len(pattern) and (pattern[p] == 0x3F or pattern[p] == string[s]):  # '?' or the byte
            s += 1
            p += 1
        elif star_p >= 0:
            p = star_p + 1
            star_s += 1
            s = star_s
        else:
            return False
    while p < len(pattern) and pattern[p] == 0x2A:
        p += 1
    return p == len(pattern)


def match_hostname(host: bytes, patterns: bytes) -> int:
    """match.c match_hostname: 1 a pattern matches, -1 a negated one matches, 0 none (host lower-cased,
    each pattern lower-cased)."""
    host = ascii_lower(host)
    positive = 0
    for sub in patterns.split(b","):
        negated = sub.startswith(b"!")
        if negated:
            sub = sub[1:]
        if len(sub) >= SUBPATTERN_MAX:
            return 0
        if match_pattern(host, ascii_lower(sub)):
            if negated:
                return -1
            positive = 1
    return positive


def _b64_strict(text: bytes) -> bytes | None:
    """b64_pton: whitespace skipped, padding required, unused bits zero (anything else is an error)."""
    text = text.translate(None, B64_SPACE)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw) == text else None


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class KeyEntry(Frozen):
    """A usable line that names the host: its marker, key and where it is."""

    path: str
    line: int
    marker: str  # "" (a host key), "cert-authority" or "revoked"
    type_name: str
    key: asyncssh.SSHKey  # the key itself; for a certificate line, the certificate's key
    is_cert: bool  # the line holds a certificate (as a plain key it equals nothing presented)

    @property
    def blob(self) -> bytes:
        """The public key's wire form (the material OpenSSH's sshkey_equal_public compares)."""
        return bytes(self.key.public_data)

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def hash_parts(names: bytes) -> tuple[bytes, bytes] | None:
    """(salt, digest) of a hashed field ``|1|salt|hash``. hostfile.c host_hash rebuilds the field from the
    salt and HMAC-SHA1(salt, host) and compares it whole, so a host matches exactly when its HMAC is digest
    and both parts are canonical base64 of 20 bytes. None: no host can match (a bad salt is OpenSSH's
    "bad host hash": the line is skipped)."""
    if not names.startswith(HASH_MAGIC):
        return None
    salt_b64, sep, digest_b64 = names[len(HASH_MAGIC):].partition(b"|")
    if not sep or not salt_b64 or len(salt_b64) > 1024:
        return None
    try:  # lenient here (fast for 10,000 lines); canonical_hash() checks a line that matched
        salt, digest = binascii.a2b_base64(salt_b64), binascii.a2b_base64(digest_b64)
    except binascii.Error:
        return None
    if len(salt) != 20 or len(digest) != 20:
        return None
    return salt, digest


def canonical_hash(names: bytes) -> bool:
    """Both parts of a hashed field are the canonical base64 OpenSSH would write (what host_hash rebuilds)."""
    salt_b64, _, digest_b64 = names[len(HASH_MAGIC):].partition(b"|")
    salt, digest = _b64_strict(salt_b64), _b64_strict(digest_b64)
    return salt is not None and digest is not None and salt_b64.translate(None, B64_SPACE) == salt_b64 \
        and digest_b64.translate(None, B64_SPACE) == digest_b64


@dataclass
class Line:
    """One line that is not a comment: its marker, its names field and the rest (key, comment)."""

    number: int
    marker: str | None  # None: a marker OpenSSH rejects (the line is skipped)
    names: bytes
    rest: bytes
    _entry: KeyEntry | bool | None = field(default=False, repr=False)  # False: not decoded yet
    _hash: tuple[bytes, bytes] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.names.startswith(b"|"):
            self._hash = hash_parts(self.names)

    def matches(self, host: bytes) -> bool:
        """hostfile.c match_maybe_hashed: a hashed field equals host's hash, or the patterns give 1."""
        if self.names.startswith(b"|"):
            return self._hash is not None and hmac.digest(self._hash[0], host, "sha1") == self._hash[1] \
                and canonical_hash(self.names)
        return match_hostname(host, self.names) == 1

    def entry(self, path: str) -> KeyEntry | None:
        """The line's key, decoded once; None when OpenSSH would skip the line as unparsable."""
        if self._entry is False:
            self._entry = _decode_entry(path, self)
        return self._entry if isinstance(self._entry, KeyEntry) else None


def _decode_entry(path: str, line: Line) -> KeyEntry | None:
    if line.marker is None or not line.rest or line.rest.startswith(b"#"):
        return None  # a bad marker, or "truncated before key type"
    type_name, sep, after = _split_field(line.rest)
    blob_text = _split_field(after.lstrip(WHITESPACE))[0] if sep else b""
    declared = KEY_TYPES.get(type_name)
    if declared is None or not blob_text:
        return None
    blob = _b64_strict(blob_text)
    if blob is None or len(blob) < 4:
        return None
    if KEY_TYPES.get(blob[4:4 + int.from_bytes(blob[:4], "big")]) != declared:
        return None  # sshkey_read: the blob's type (and ECDSA curve) must be the line's
    is_cert = declared[0].endswith("-cert")
    try:
        key = decode_ssh_certificate(blob).key if is_cert else decode_ssh_public_key(blob)
    except (asyncssh.KeyImportError, ValueError):
        return None
    return KeyEntry(path, line.number, line.marker, type_name.decode(), key, is_cert)


def _split_field(text: bytes) -> tuple[bytes, bytes, bytes]:
    """The text up to the first space or tab, whether there was one, and what follows it."""
    for index, byte in enumerate(text):
        if byte in WHITESPACE:
            return text[:index], b" ", text[index + 1:]
    return text, b"", b""


def _marker(text: bytes) -> tuple[str | None, bytes]:
    """hostfile.c check_markers: at most one marker, ended by the line's first space (else first tab)."""
    found = ""
    while text.startswith(b"@"):
        if found:
            return None, text
        c_string = text.split(b"\0", 1)[0]  # strchr stops at a NUL
        end = c_string.find(b" ")
        if end < 0:
            end = c_string.find(b"\t")
        if end < 0 or end <= 1 or end >= 32:
            return None, text
        name = MARKERS.get(text[:end])
        if name is None:
            return None, text
        found = name
        text = text[end:].lstrip(WHITESPACE)
    return found, text


@dataclass
class ParsedFile:
    """A known_hosts file's lines, with lines whose names are only literals indexed by those names."""

    path: str
    lines: list[Line]
    literal: dict[bytes, list[int]]  # lower-cased literal name -> lines (positions in ``lines``)
    scan: list[int]  # lines with wildcards: tried against every host
    hashed: list[tuple[int, bytes, bytes]]  # (position, salt, HMAC-SHA1) of each hashed line that can match

    found: OrderedDict[bytes, list[Line]] = field(default_factory=OrderedDict, repr=False)
    _states: list[tuple[int, Any, Any, bytes]] | None = field(default=None, repr=False)

    def _hmac_states(self) -> list[tuple[int, Any, Any, bytes]]:
        """Each hashed line's HMAC-SHA1 key schedule, made once: a host then costs two SHA-1 updates a line."""
        if self._states is None:
            self._states = [(index, hashlib.sha1(salt.ljust(64, b"\0").translate(_IPAD)),
                             hashlib.sha1(salt.ljust(64, b"\0").translate(_OPAD)), mac)
                            for index, salt, mac in self.hashed]
        return self._states

    def matching(self, host: bytes) -> list[Line]:
        """The lines that name host, in file order (remembered for the last MATCHES_KEPT names)."""
        with _LOCK:
            if host in self.found:
                return self.found[host]
        literal = [index for index in self.literal.get(host, ()) if self.lines[index].matches(host)]
        scanned = [index for index in self.scan if self.lines[index].matches(host)]
        scanned += [index for index, inner, outer, mac in self._hmac_states()
                    if _hmac(inner, outer, host) == mac and canonical_hash(self.lines[index].names)]
        lines = [self.lines[index] for index in sorted({*literal, *scanned})]
        with _LOCK:
            self.found[host] = lines
            while len(self.found) > MATCHES_KEPT:
                self.found.popitem(last=False)
        return lines


def parse_text(path: str, data: bytes) -> ParsedFile:
    lines: list[Line] = []
    literal: dict[bytes, list[int]] = {}
    scan: list[int] = []
    hashed: list[tuple[int, bytes, bytes]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        text = raw.lstrip(WHITESPACE)
        if not text or text[0] in b"#\0":
            continue
        marker, text = _marker(text)
        # hostfile.c ends the names at a space, a tab or a NUL and goes on one byte past it: a NUL there
        # separates like a space; everything after is read as a C string (to the next NUL).
        found = _NAMES_END.search(text)
        end = found.start() if found else len(text)
        names, rest = text[:end], text[end + 1:].split(b"\0", 1)[0]
        position = len(lines)
        lines.append(Line(number, marker, names, rest.lstrip(WHITESPACE)))
        if marker is None:
            continue  # never matches anything usable: skipped as OpenSSH does
        subs = names.split(b",")
        if names.startswith(b"|"):
            parts = lines[-1]._hash
            if parts is not None:
                hashed.append((position, *parts))
        elif any(b"*" in sub or b"?" in sub or len(sub) >= SUBPATTERN_MAX for sub in subs):
            scan.append(position)
        else:
            for sub in subs:
                if not sub.startswith(b"!"):
                    literal.setdefault(ascii_lower(sub), []).append(position)
    return ParsedFile(path, lines, literal, scan, hashed)


_IPAD = bytes(byte ^ 0x36 for byte in range(256))
_OPAD = bytes(byte ^ 0x5C for byte in range(256))


def _hmac(inner: Any, outer: Any, message: bytes) -> bytes:
    """HMAC-SHA1 (RFC 2104) from the precomputed inner and outer states of its key."""
    first = inner.copy()
    first.update(message)
    second = outer.copy()
    second.update(first.digest())
    return bytes(second.digest())


class FileTooBig(Exception):
    """A known_hosts file past MAX_FILE_BYTES: refused, not read."""


_CACHE: OrderedDict[str, tuple[tuple[int, int, int, int], ParsedFile]] = OrderedDict()
_CACHE_FILES = 256
_LOCK = threading.Lock()


def load(path: str) -> ParsedFile | None:
    """The parsed file, from the cache while its device, inode, mtime and size are unchanged; None when
    it cannot be opened or read (OpenSSH skips such a file)."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            signature = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)
            with _LOCK:
                cached = _CACHE.get(path)
                if cached and cached[0] == signature:
                    _CACHE.move_to_end(path)
                    return cached[1]
            if info.st_size > MAX_FILE_BYTES:
                raise FileTooBig(f"known_hosts file {path} is {info.st_size} bytes, over "
                                 f"{MAX_FILE_BYTES // (1024 * 1024)} MiB: not read")
            data = handle.read(MAX_FILE_BYTES + 1)
    except (OSError, ValueError):
        return None
    if len(data) > MAX_FILE_BYTES:
        raise FileTooBig(f"known_hosts file {path} grew past {MAX_FILE_BYTES // (1024 * 1024)} MiB: not read")
    parsed = parse_text(path, data)
    with _LOCK:
        _CACHE[path] = (signature, parsed)
        _CACHE.move_to_end(path)
        while len(_CACHE) > _CACHE_FILES:
            _CACHE.popitem(last=False)
    return parsed
