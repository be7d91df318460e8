"""The host keys proofbot trusts for a host: exactly those OpenSSH 9.2's ``ssh NAME`` would, decided here.

The rule, transliterated from sshconnect.c ``check_host_key`` (OpenSSH 9.2p1): known_hosts (the
user's files, then the global ones) is searched for the host's name lower-cased, as
``[name]:port`` when the port is not 22, or for ``HostKeyAlias``; never for the peer's address
(CheckHostIP is off by default since 8.5) and never by CIDR. A certificate is trusted through an
``@cert-authority`` line for that name, checked for its principals (the name without the port, or
the alias), its dates, critical options and CA signature algorithm; one that fails falls back to
its plain key. ``@revoked`` lines for the name refuse a key or a CA in every form. A port other
than 22 with no key listed under ``[name]:port`` is looked up again without the port.
``decide`` gives the verdict and its reason for the key a host presents; ``commands.ssh.options``
makes asyncssh apply it.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field, replace

import asyncssh
from asyncssh.public_key import get_certificate_algs, get_public_key_algs

from commands.frozen import Frozen
from commands.host_cert import Presented, cert_failure
from commands.known_hosts_file import KEY_TYPES, KeyEntry, ascii_lower, load

# myproposal.h KEX_DEFAULT_PK_ALG: the client's HostKeyAlgorithms before order_hostkeyalgs reorders it.
DEFAULT_HOST_KEY_ALGS = (
    "ssh-ed25519-cert-v01@openssh.com", "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com", "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com", "rsa-sha2-256-cert-v01@openssh.com",
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com", "rsa-sha2-512", "rsa-sha2-256",
)
__all__ = ["Decision", "Lookup", "Trust", "decide", "lookup_for", "note_address_entry", "trust_for"]


def canonical_host(address: str) -> str:
    """ssh.c: an address is canonicalised (getaddrinfo AI_NUMERICHOST, then getnameinfo), then every
    host name lower-cased (sshconnect.c ssh_login)."""
    host = address
    try:
        infos = socket.getaddrinfo(address, "22", type=socket.SOCK_STREAM,
                                   flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)
        if len(infos) == 1:
            host = socket.getnameinfo(infos[0][4], socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)[0]
    except (OSError, UnicodeError, ValueError):
        pass  # a name, not an address
    return ascii_lower(host.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class Lookup(Frozen):
    """What known_hosts is searched for, and the name a host certificate must carry."""

    host: str  # the address or name, canonical and lower-cased
    port: int
    alias: str | None  # HostKeyAlias, lower-cased

    @property
    def name(self) -> str:
        if self.alias is not None:
            return self.alias
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    @property
    def fallback(self) -> bool:
        """A key unknown under [host]:port is looked up under host (no alias, port not 22)."""
        return self.alias is None and self.port != 22

    @property
    def cert_name(self) -> str:
        return self.alias if self.alias is not None else self.host


def lookup_for(address: str, port: int, alias: str | None) -> Lookup:
    lowered = None if alias is None else ascii_lower(alias.encode("utf-8", "surrogateescape")).decode(
        "utf-8", "surrogateescape")
    return Lookup(canonical_host(address), port, lowered)


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class Trust(Frozen):
    """Every usable known_hosts line that names the host (under its lookup name, and without the port
    when that applies), from the files that exist, user files first."""

    lookup: Lookup
    files: tuple[str, ...]
    at_name: tuple[KeyEntry, ...]
    at_host: tuple[KeyEntry, ...]  # lines for the port-less name (empty unless lookup.fallback)
    skipped: tuple[str, ...] = ()  # file:line of lines naming the host that OpenSSH skips as unparsable

    def asyncssh_known_hosts(self) -> tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey], list[asyncssh.SSHKey]]:
        """asyncssh's (trusted host keys, trusted CA keys, revoked keys): a superset of what ``decide`` can
        accept, and only revocations that ``decide`` always honours, so asyncssh's own check agrees."""
        every = self.at_name + self.at_host
        return ([e.key for e in every if e.marker == "" and not e.is_cert],
                [e.key for e in every if e.marker == "cert-authority"],
                [e.key for e in self.at_name if e.marker == "revoked"])

    def algorithms(self) -> list[str]:
        """sshconnect2.c order_hostkeyalgs: the algorithms of keys known for the name first (all certificate
        algorithms first when a CA is), else the default order; kept to those asyncssh implements."""
        supported = {alg.decode() for alg in get_public_key_algs() + get_certificate_algs()}
        revoked = {e.blob for e in self.at_name if e.marker == "revoked"}

        def plain_known(alg: str) -> bool:
            family, curve = KEY_TYPES[alg.encode()]
            family = family.removesuffix("-cert")
            for entry in self.at_name:  # lookup_key_in_hostkeys_by_type: the first of that type decides
                if entry.marker == "" and KEY_TYPES[entry.type_name.encode()] == (family, curve):
                    return entry.blob not in revoked
            return False

        if plain_known(DEFAULT_HOST_KEY_ALGS[0]):
            ordered = list(DEFAULT_HOST_KEY_ALGS)
        else:
            has_ca = any(e.marker == "cert-authority" for e in self.at_name)
            first = [a for a in DEFAULT_HOST_KEY_ALGS if ("-cert-" in a and has_ca) or plain_known(a)]
            ordered = first + [a for a in DEFAULT_HOST_KEY_ALGS if a not in first]
        return [alg for alg in ordered if alg in supported]


def trust_for(lookup: Lookup, user_files: list[str], global_files: list[str]) -> Trust:
    """The lines of every readable file (user files, then global) that name the host. Pure: reads files."""
    names = [lookup.name.encode("utf-8", "surrogateescape")]
    if lookup.fallback:
        names.append(lookup.host.encode("utf-8", "surrogateescape"))
    found: list[list[KeyEntry]] = [[] for _ in names]
    files: list[str] = []
    skipped: list[str] = []
    for path in [*user_files, *global_files]:
        parsed = load(path)
        if parsed is None:
            continue
        files.append(path)
        for index, name in enumerate(names):
            for line in parsed.matching(name):
                entry = line.entry(path)
                if entry is None:
                    skipped.append(f"{path}:{line.number}")
                else:
                    found[index].append(entry)
    return Trust(lookup, tuple(files), tuple(found[0]), tuple(found[1]) if lookup.fallback else (),
                 tuple(dict.fromkeys(skipped)))


@dataclass
class Decision:
    """What OpenSSH would do with the key a host presented, and why (``reason`` names file:line)."""

    accepted: bool
    kind: str  # "key", "ca", "fallback" when accepted; else "revoked", "revoked-ca", "principal",
    #            "expired", "not-yet-valid", "untrusted-ca", "bad-certificate", "changed", "unknown", "ca-only"
    reason: str
    hint: str = ""
    key_data: bytes = b""  # what asyncssh's own check is given: the certificate, or on a fallback its key
    events: list[tuple[str, str]] = field(default_factory=list)


def decide(trust: Trust, key_data: bytes, now: float) -> Decision:
    """check_host_key for the presented key (a plain key or a certificate), with its reason."""
    try:
        presented = Presented.parse(key_data)
    except ValueError as exc:
        return Decision(False, "bad-certificate", f"the host presented a key proofbot cannot read: {exc}",
                        hint="nothing was trusted; check the host's HostKey / HostCertificate files")
    events: list[tuple[str, str]] = []
    via = _check(trust, presented, False, now, events)
    if via is not None:
        stricter = _revoked_without_port(trust, presented, via)
        if stricter is not None:
            return stricter
        kind = "ca" if via == "ca" else ("fallback" if presented.cert is not None else "key")
        sent = presented.blob_as_sent if via == "ca" else presented.plain_blob
        return Decision(True, kind, f"trusted through {events[-1][1]}", key_data=sent, events=events)
    return _refusal(trust, presented, events)


def _revoked_without_port(trust: Trust, presented: Presented, via: str) -> Decision | None:
    """proofbot's one deliberate refusal where OpenSSH connects: a key (or CA) @revoked for the host without
    the port. OpenSSH reads those lines only when [host]:port lists no key; a revoked key is refused here on
    every port of the host."""
    blobs = {presented.plain_blob} | ({presented.signer_blob} if via == "ca" else set())
    for entry in trust.at_host:
        if entry.marker == "revoked" and entry.blob in blobs:
            what = "the CA of its certificate" if entry.blob != presented.plain_blob else \
                f"its host key {presented.fingerprint()}"
            return Decision(False, "revoked",
                            f"{what} is marked @revoked for {trust.lookup.host} in {entry.where()}; OpenSSH 9.2 "
                            f"would connect (it reads that line only when no key is listed under "
                            f"{trust.lookup.name}), proofbot refuses a key revoked for the host on any port",
                            hint="known_hosts marks it @revoked, and a revoked key may be a stolen one: do not add or "
                                 "replace this key in known_hosts; remove the @revoked line only once the key is "
                                 "known to be safe")
    return None


def note_address_entry(trust: Trust, decision: Decision, address: str, key_data: bytes) -> Decision:
    """An unknown key that a line lists under the peer's address: said, since asyncssh (and so proofbot
    before) took such a line for the name; OpenSSH does not look up the address (CheckHostIP is off)."""
    lookup = lookup_for(address, trust.lookup.port, None)
    if decision.kind != "unknown" or lookup.host == trust.lookup.host:
        return decision
    plain = Presented.parse(key_data).plain_blob
    other = trust_for(lookup, list(trust.files), [])
    for entry in other.at_name + other.at_host:
        if entry.marker == "" and not entry.is_cert and entry.blob == plain:
            return replace(decision, reason=f"{decision.reason}; {entry.where()} lists this key under {address}, "
                                            f"which OpenSSH does not look up for {trust.lookup.name} (CheckHostIP "
                                            "is off)")
    return decision


def _status(entries: tuple[KeyEntry, ...], key: Presented) -> tuple[str, KeyEntry | None]:
    """hostfile.c check_hostkeys_by_key_or_type, then check_key_not_revoked."""
    want_cert = key.cert is not None
    status, found = "new", None
    for entry in entries:
        if entry.marker != ("cert-authority" if want_cert else ""):
            continue
        if want_cert:
            if entry.blob == key.signer_blob:
                status, found = "ok", entry
                break
        else:
            if not entry.is_cert and entry.blob == key.plain_blob:
                status, found = "ok", entry
                break
            status, found = "changed", entry
    for entry in entries:
        if entry.marker == "revoked" and (entry.blob == key.plain_blob
                                          or (want_cert and entry.blob == key.signer_blob)):
            return "revoked", entry
    return status, found


def _check(trust: Trust, presented: Presented, clobber: bool, now: float,
           events: list[tuple[str, str]]) -> str | None:
    """sshconnect.c check_host_key: "ca" or "key" when trusted (the last event says where), else None."""
    entries = trust.at_host if clobber else trust.at_name
    name = trust.lookup.host if clobber else trust.lookup.name
    key = presented
    while True:
        status, found = _status(entries, key)
        if status == "ok" and found is not None:
            if key.cert is None:
                events.append(("key", f"{found.where()} ({name})"))
                return "key"
            failure = cert_failure(key, trust.lookup.cert_name, now)
            if failure is None:
                events.append(("ca", f"the @cert-authority line {found.where()} ({name})"))
                return "ca"
            events.append((failure[0], f"{failure[1]} (its CA is trusted by {found.where()})"))
        elif status == "new":
            if trust.lookup.fallback and not clobber:
                via = _check(trust, key, True, now, events)
                if via is not None:
                    return via
            events.append(("untrusted-ca" if key.cert is not None else "unknown", name))
        elif status == "revoked" and found is not None:
            revoked_ca = key.cert is not None and found.blob == key.signer_blob and found.blob != key.plain_blob
            events.append(("revoked-ca" if revoked_ca else "revoked", f"{found.where()} ({name})"))
        elif found is not None:
            events.append(("changed", f"{found.where()} ({name})"))
        if key.cert is not None and status != "revoked":
            key = key.without_cert()
            continue
        return None


def _refusal(trust: Trust, presented: Presented, events: list[tuple[str, str]]) -> Decision:
    """The reason for a refusal: a revocation first, then what was wrong with a certificate, then the key."""
    kinds = [kind for kind, _ in events]
    fp = presented.fingerprint()
    files = ", ".join(trust.files)
    name = trust.lookup.name
    skipped = f"; {len(trust.skipped)} line(s) naming it were skipped as unparsable ({', '.join(trust.skipped[:3])})" \
        if trust.skipped else ""
    never = "do not add or replace this key in known_hosts"
    for kind in ("revoked-ca", "revoked"):
        if kind in kinds:
            where = dict(events)[kind]
            what = (f"the CA that signed its certificate ({presented.signer_fingerprint()})" if kind == "revoked-ca"
                    else f"its host key {fp}")
            return Decision(False, kind, f"{what} is marked @revoked in {where}",
                            hint=f"known_hosts marks it @revoked, and a revoked key may be a stolen one: {never}; "
                                 "the host must be re-keyed and its new key checked out of band", events=events)
    cert_kinds = [k for k in kinds if k in ("principal", "expired", "not-yet-valid", "bad-certificate")]
    if presented.cert is not None and (cert_kinds or "untrusted-ca" in kinds):
        if cert_kinds:
            kind = cert_kinds[0]
            what = f"its host certificate {dict(events)[kind]}"
        else:
            kind = "untrusted-ca"
            what = (f"its host certificate is signed by CA {presented.signer_fingerprint()}, which no "
                    f"@cert-authority line for {name} names in {files}")
        plain = _plain_outcome(events, name)
        hint = {"principal": f"a certificate for another name is what an impersonating host presents: {never}; "
                             "check the host, and have its key signed for this name (ssh-keygen -s CA -h -n NAME)",
                "expired": "have the CA sign the host key again (ssh-keygen -s CA -h -V …); "
                           f"{never} to get past it",
                "not-yet-valid": "check this machine's clock and the certificate's -V dates; "
                                 f"{never} to get past it",
                "untrusted-ca": f"another CA's certificate may be an impersonation: {never}; check which CA "
                                "signs this fleet's host keys and that an @cert-authority line names it",
                "bad-certificate": f"{never}; have the CA sign the host key again with a supported algorithm"}[kind]
        return Decision(False, kind, f"{what}; and {plain}{skipped}", hint=hint, events=events)
    if "changed" in kinds:
        return Decision(False, "changed",
                        f"the host presented {presented.key_type()} key {fp}, but {dict(events)['changed']} lists "
                        f"another key for {name}: the host key changed{skipped}",
                        hint=f"a changed key may be an impersonation: {never} until the host's new key is "
                             "checked out of band", events=events)
    ca_only = [e for e in trust.at_name + trust.at_host if e.marker == "cert-authority"]
    if ca_only and not any(e.marker == "" for e in trust.at_name + trust.at_host):
        return Decision(False, "ca-only",
                        f"known_hosts trusts {name} only through a host CA ({ca_only[0].where()}), and the host "
                        f"presented a plain {presented.key_type()} key {fp}, no certificate{skipped}",
                        hint="sign its host key with that CA (HostCertificate in its sshd_config), or add its own "
                             "key after checking it out of band", events=events)
    return Decision(False, "unknown",
                    f"no key for {name} in {files or 'any known_hosts file'}; it presented "
                    f"{presented.key_type()} key {fp}{skipped}",
                    hint="verify this key out of band (on the host: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub) "
                         "before adding it", events=events)


def _plain_outcome(events: list[tuple[str, str]], name: str) -> str:
    """What the fallback to the certificate's plain key found."""
    kinds = dict(events)
    if "changed" in kinds:
        return f"its plain key is not the one {kinds['changed']} lists"
    return f"its plain key is not listed for {name}"
