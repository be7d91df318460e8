"""Every keyword OpenSSH 9.2's client config knows (readconf.c ``keywords[]``), and what proofbot does with each.

TAKEN options are resolved exactly as ssh does (commands/ssh_config/evaluate.py). REFUSED_WHEN says,
for options that would change the address, port, user, identity, trust or route and that proofbot does
not implement, which effective values make proofbot refuse the host (naming the line). Everything else
changes nothing proofbot does (it never forwards, never runs a command, always checks host keys) and is
listed by ``ping -v`` / ``inventory show`` as not taken.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from commands.ssh_config.ciphers import DEFAULT as DEFAULT_CIPHERS
from commands.ssh_config.ciphers import bad_spec, effective

TAKEN = frozenset({
    "hostname", "port", "user", "identityfile", "identityfile2", "certificatefile", "userknownhostsfile",
    "globalknownhostsfile", "hostkeyalias", "proxyjump", "proxycommand", "canonicalizehostname",
    "canonicaldomains", "canonicalizemaxdots", "canonicalizefallbacklocal", "canonicalizepermittedcnames",
    "ignoreunknown", "host", "match", "include",
})

# Known to ssh but a no-op there (oDeprecated, oUnsupported, oIgnore): ssh logs them and goes on.
NO_OP = frozenset({
    "protocol", "cipher", "fallbacktorsh", "globalknownhostsfile2", "rhostsauthentication", "userknownhostsfile2",
    "useroaming", "usersh", "useprivilegedport", "afstokenpassing", "kerberosauthentication",
    "kerberostgtpassing", "rsaauthentication", "rhostsrsaauthentication", "compressionlevel",
})

OTHER = frozenset({
    "gssapiauthentication", "gssapidelegatecredentials", "pkcs11provider", "smartcarddevice", "forwardagent",
    "forwardx11", "forwardx11trusted", "forwardx11timeout", "exitonforwardfailure", "xauthlocation",
    "gatewayports", "passwordauthentication", "kbdinteractiveauthentication", "kbdinteractivedevices",
    "challengeresponseauthentication", "skeyauthentication", "tisauthentication", "pubkeyauthentication",
    "dsaauthentication", "hostbasedauthentication", "identitiesonly", "addkeystoagent", "identityagent",
    "ciphers", "macs", "remoteforward", "localforward", "permitremoteopen", "escapechar",
    "connectionattempts", "batchmode", "checkhostip", "stricthostkeychecking", "compression", "tcpkeepalive",
    "keepalive", "numberofpasswordprompts", "syslogfacility", "loglevel", "logverbose", "dynamicforward",
    "preferredauthentications", "hostkeyalgorithms", "casignaturealgorithms", "bindaddress", "bindinterface",
    "clearallforwardings", "enablesshkeysign", "verifyhostkeydns", "nohostauthenticationforlocalhost",
    "rekeylimit", "connecttimeout", "addressfamily", "serveraliveinterval", "serveralivecountmax", "sendenv",
    "setenv", "controlpath", "controlmaster", "controlpersist", "hashknownhosts", "tunnel", "tunneldevice",
    "localcommand", "permitlocalcommand", "remotecommand", "visualhostkey", "kexalgorithms", "ipqos",
    "requesttty", "sessiontype", "stdinnull", "forkafterauthentication", "proxyusefdpass",
    "streamlocalbindmask", "streamlocalbindunlink", "revokedhostkeys", "fingerprinthash", "updatehostkeys",
    "hostbasedacceptedalgorithms", "hostbasedkeytypes", "pubkeyacceptedalgorithms", "pubkeyacceptedkeytypes",
    "securitykeyprovider", "knownhostscommand", "requiredrsasize", "enableescapecommandline",
})

KNOWN = TAKEN | NO_OP | OTHER


def _yes(value: str) -> bool:
    return value.lower() in ("yes", "true", "ask", "confirm", "always")


def _not_none(value: str) -> bool:
    return value.lower() != "none"


def _other_ciphers(value: str) -> bool:
    """Ciphers whose effective set is not OpenSSH's default (the set proofbot offers, in its own order)."""
    try:
        return set(effective(value)) != set(DEFAULT_CIPHERS)
    except ValueError:
        return True


# keyword -> (is this effective value refused, why)
REFUSED_WHEN: dict[str, tuple[Callable[[str], bool], str]] = {
    "knownhostscommand": (_not_none, "KnownHostsCommand runs a command (as root here) to decide which host "
                                     "keys are trusted: proofbot runs no command a config names"),
    "checkhostip": (_yes, "CheckHostIP also checks the peer address in known_hosts: proofbot does not implement "
                          "it and will not trust differently from ssh"),
    "verifyhostkeydns": (_yes, "VerifyHostKeyDNS trusts host keys from DNS (SSHFP): proofbot does not"),
    "nohostauthenticationforlocalhost": (_yes, "NoHostAuthenticationForLocalhost skips the host key check: "
                                               "proofbot always checks host keys"),
    "revokedhostkeys": (_not_none, "RevokedHostKeys is a revocation list proofbot does not read: it would "
                                   "trust a key ssh refuses"),
    "pkcs11provider": (_not_none, "PKCS11Provider gives identities proofbot cannot use"),
    "smartcarddevice": (_not_none, "SmartcardDevice gives identities proofbot cannot use"),
    "addressfamily": (lambda value: value.lower() in ("inet", "inet6"),
                      "AddressFamily restricts which address is reached: proofbot does not implement it"),
    "bindaddress": (lambda value: True, "BindAddress changes the route (source address): proofbot does not "
                                        "implement it"),
    "bindinterface": (lambda value: True, "BindInterface changes the route: proofbot does not implement it"),
    "ciphers": (_other_ciphers, "proofbot offers OpenSSH's default set of ciphers (AES-GCM first) and does not take "
                                "Ciphers yet: ssh would offer another set. Remove the line for this host"),
    "pubkeyauthentication": (lambda value: value.lower() in ("no", "false"),
                             "PubkeyAuthentication no: ssh would offer no key, proofbot logs in only with keys"),
}


_FLAG = frozenset({"yes", "no", "true", "false"})
# readconf.c's parse_flag / parse_multistate tables (matched case-insensitively), by keyword.
CHOICES: dict[str, frozenset[str]] = {
    **dict.fromkeys((
        "forwardx11", "forwardx11trusted", "gatewayports", "exitonforwardfailure", "passwordauthentication",
        "kbdinteractiveauthentication", "challengeresponseauthentication", "skeyauthentication", "tisauthentication",
        "hostbasedauthentication", "gssapiauthentication", "gssapidelegatecredentials", "batchmode", "checkhostip",
        "tcpkeepalive", "keepalive", "nohostauthenticationforlocalhost", "clearallforwardings", "enablesshkeysign",
        "identitiesonly", "hashknownhosts", "permitlocalcommand", "visualhostkey", "forkafterauthentication",
        "proxyusefdpass", "streamlocalbindunlink", "enableescapecommandline"), _FLAG),
    "addressfamily": frozenset({"inet", "inet6", "any"}),
    "compression": frozenset({"yes", "no"}),
    "controlmaster": _FLAG | {"auto", "ask", "autoask"},
    "pubkeyauthentication": _FLAG | {"unbound", "host-bound"},
    "dsaauthentication": _FLAG | {"unbound", "host-bound"},
    "requesttty": _FLAG | {"force", "auto"},
    "sessiontype": frozenset({"none", "subsystem", "default"}),
    "stricthostkeychecking": _FLAG | {"ask", "off", "accept-new"},
    "tunnel": _FLAG | {"ethernet", "point-to-point"},
    "verifyhostkeydns": _FLAG | {"ask"},
    "updatehostkeys": _FLAG | {"ask"},
}
INTEGER = frozenset({"numberofpasswordprompts", "serveralivecountmax", "connectionattempts"})
TIME = frozenset({"forwardx11timeout", "serveraliveinterval", "connecttimeout"})
ONE_WORD = frozenset({"kbdinteractivedevices", "xauthlocation", "preferredauthentications", "bindaddress",
                      "bindinterface", "pkcs11provider", "smartcarddevice", "securitykeyprovider", "controlpath",
                      "revokedhostkeys"}) | CHOICES.keys() | INTEGER | TIME


def bad_value(keyword: str, args: tuple[str, ...]) -> str | None:
    """Why ssh rejects this line of an option proofbot does not take (None: ssh accepts it)."""
    if keyword == "ciphers":
        if len(args) > 1:
            return f"keyword {keyword} extra arguments at end of line"
        return bad_spec(args[0]) if args else None
    if keyword not in ONE_WORD:
        return None
    if len(args) > 1:
        return f"keyword {keyword} extra arguments at end of line"
    value = args[0] if args else ""
    if keyword in CHOICES and value.lower() not in CHOICES[keyword]:
        return f'unsupported option "{value}".'
    if keyword in INTEGER and not re.fullmatch(r"\s*[+-]?\d+", value):
        return "integer value invalid."
    if keyword in TIME and value != "none" and not re.fullmatch(r"(\d+[sSmMhHdDwW]?)+", value):
        return "invalid time value."
    return None
