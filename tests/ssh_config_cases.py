"""Operator ssh configs for the differential suite (tests/test_ssh_config_differential.py), each run through
OpenSSH 9.2's ``ssh -G`` and proofbot's resolution.

``{d}`` in a config or file is the case's own directory. ``expect``: ``agree`` (both resolve, every value
proofbot takes equal), ``refuse`` (proofbot refuses naming file and line, whatever ssh says), ``both-refuse``
(ssh exits non-zero and proofbot refuses).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    id: str
    config: str
    name: str = "web1"
    user: str | None = None  # -l / ssh.user
    port: int | None = None  # -p / port
    keys: tuple[str, ...] = ()  # -i / ssh.client_keys (made as files)
    known: tuple[str, ...] | None = None  # -o UserKnownHostsFile= / ssh.known_hosts
    files: dict[str, str] = field(default_factory=dict)  # relative path -> text
    modes: dict[str, int] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)  # relative path -> user name
    expect: str = "agree"
    refusal: str = ""
    hosts: str | None = None  # a private /etc/hosts (the case runs under unshare -m)
    env: dict[str, str] = field(default_factory=dict)
    home: bool = False  # HOME is the case directory (relative Include reads {d}/.ssh/)


BASIC = "Host *\n    User fallback\n"

CASES = [
    # Host patterns
    Case("plain-block", "Host web1\n    HostName 10.0.0.1\n    User ops\n    Port 2200\n"),
    Case("wildcard-question", "Host web?\n    User q\n" + BASIC),
    Case("wildcard-no-match", "Host web?\n    User q\n" + BASIC, name="web10"),
    Case("negation-skips-block", "Host * !web1\n    User nobody\nHost *\n    User ops\n"),
    Case("negation-first", "Host !web1 *\n    User nobody\n" + BASIC),
    Case("negation-other-host", "Host * !web2\n    User notweb2\n" + BASIC),
    Case("comma-is-not-a-separator", "Host web1,web2\n    User listed\n" + BASIC),
    Case("comma-literal-name", "Host web1,web2\n    User listed\n" + BASIC, name="web2"),
    Case("trailing-comment-not-a-pattern", "Host web3 # prod\n    User web3\n" + BASIC, name="prod"),
    Case("trailing-comment-pattern-kept", "Host web3 # prod\n    User web3\n" + BASIC, name="web3"),
    Case("name-case-matches-as-typed", "Host web1\n    User lower\n" + BASIC, name="Web1"),
    Case("pattern-case-sensitive", "Host WEB1\n    User upper\n" + BASIC),
    Case("several-patterns", "Host db1 web1 cache1\n    User many\n" + BASIC),
    Case("equals-and-quotes", 'Host=web1\n    User = ops\n    IdentityFile "{d}/my key"\n    Port=2201\n'),
    # first value obtained wins
    Case("first-value-wins", "Host web1\n    User a\nHost *\n    User b\n    Port 2\n"),
    Case("identityfile-accumulates", "Host web1\n    IdentityFile {d}/k1\nHost *\n    IdentityFile {d}/k2\n"
                                     "    IdentityFile {d}/k1\n"),
    Case("identityfile-none", "Host web1\n    IdentityFile none\n"),
    Case("knownhosts-list-first-wins", "Host web1\n    UserKnownHostsFile {d}/a {d}/b\nHost *\n"
                                       "    UserKnownHostsFile {d}/c\n"),
    Case("certificatefiles", "Host *\n    CertificateFile {d}/c1-cert.pub\n    CertificateFile ~/c2-cert.pub\n"),
    Case("globalknownhostsfile", "Host web1\n    GlobalKnownHostsFile {d}/g1 ~/g2\n"),
    Case("globalknownhostsfile-none", "Host web1\n    GlobalKnownHostsFile none\n"),
    Case("hostkeyalias-lowercased", "Host web1\n    HostKeyAlias MixedCase.Example\n"),
    Case("port-service-name", "Host web1\n    Port ssh\n"),
    Case("port-zero", "Host web1\n    Port 0\n", expect="both-refuse"),
    Case("bad-value-in-a-block-that-does-not-apply", "Host other\n    Port 0\n" + BASIC, expect="both-refuse",
         refusal="Bad port"),
    Case("bad-proxyjump-in-included-inactive-file", "Host other\n    Include {d}/inc.conf\n",
         files={"inc.conf": "ProxyJump a,,b\n"}, expect="both-refuse", refusal="Invalid ProxyJump"),
    # tokens, expanded at the end with the effective values
    Case("tokens-in-knownhosts", "Host web1\n    HostName %h.fleet.test\n    User cfguser\n    Port 2022\n"
                                 "    UserKnownHostsFile ~/kh_%h_%p_%r_%n_%u_%d_%i_%L %%literal\n"),
    Case("tokens-use-inventory-values", "Host web1\n    User cfguser\n    Port 2022\n"
                                        "    UserKnownHostsFile {d}/kh_%r_%p %d/x\n", user="invuser", port=2300),
    Case("hostkeyalias-token", "Host web1\n    HostKeyAlias Alias1\n    UserKnownHostsFile {d}/kh_%k\n"),
    Case("dollar-env", "Host web1\n    UserKnownHostsFile ${KH_DIR}/known\n", env={"KH_DIR": "/srv/kh"}),
    Case("unknown-token", "Host web1\n    UserKnownHostsFile {d}/kh_%Z\n", expect="both-refuse"),
    Case("hostname-token-and-case", "Host Web1\n    HostName %h.Fleet.Test\n", name="Web1"),
    Case("numeric-hostname-canonical", "Host web1\n    HostName 127.1\n"),
    # Match
    Case("match-user-after-l", "Match user deploy\n    IdentityFile {d}/deploy_key\nHost *\n"
                               "    IdentityFile {d}/other_key\n", user="deploy"),
    Case("match-user-from-config", "Host web1\n    User deploy\nMatch user deploy\n    Port 2222\n"),
    Case("match-user-list-negated", "Match user !root,*\n    Port 2223\n", user="ops"),
    Case("match-localuser", "Match localuser root\n    User fromlocal\n"),
    Case("match-originalhost", "Match originalhost web*\n    HostName 10.1.1.1\n"),
    Case("match-host-after-hostname", "Host web1\n    HostName db.fleet\nMatch host db.*\n    User dbadmin\n"),
    Case("match-host-token-hostname", "Host web1\n    HostName %h.fleet.test\nMatch host *.fleet.test\n"
                                      "    Port 2201\n"),
    Case("match-all", "Match all\n    User everyone\n"),
    Case("match-not-host", "Match !host web1\n    User notweb1\n" + BASIC),
    Case("match-final-fills", "Match final\n    Port 2022\n"),
    Case("match-final-first-pass-wins", "Match final host web1\n    User finaluser\n" + BASIC),
    Case("match-canonical-on-final-pass", "Match canonical\n    User canon\nMatch final\n    HostKeyAlias fin\n"),
    Case("match-final-host-is-hostname", "Host web1\n    HostName 10.2.2.2\nMatch final host 10.2.2.2\n"
                                         "    User ip\n"),
    Case("match-trailing-comment", "Match host web1 # the web tier\n    User commented\n"),
    Case("match-exec-refused", 'Match exec "true"\n    User x\n', expect="refuse", refusal="Match exec"),
    Case("match-bad-attribute", "Match port 22\n    User x\n", expect="both-refuse"),
    Case("match-all-combined", "Match all host web1\n    User x\n", expect="both-refuse"),
    # Include
    Case("include-glob-sorted", "Include {d}/conf.d/*.conf\n",
         files={"conf.d/b.conf": "User b\n", "conf.d/a.conf": "User a\n"}),
    Case("include-dotfile-skipped", "Include {d}/conf.d/*\n" + BASIC,
         files={"conf.d/.hidden": "User hidden\n", "conf.d/z": "Port 2024\n"}),
    Case("include-relative-is-home-ssh", "Include rel.conf\n", files={".ssh/rel.conf": "User relative\n"}, home=True),
    Case("include-in-inactive-block", "Host other\n    Include {d}/inc.conf\n" + BASIC,
         files={"inc.conf": "User frominc\nHost *\n    Port 2999\n"}),
    Case("include-restores-active", "Host web1\n    Include {d}/inc.conf\n    User after\n",
         files={"inc.conf": "Host nomatch\n    Port 1\n"}),
    Case("include-tokens-expanded-at-end", "Include {d}/inc.conf\nHost web1\n    User late\n"
                                           "    HostName late.fleet\n",
         files={"inc.conf": "Host *\n    UserKnownHostsFile {d}/%r_%h_%%\n"}),
    Case("include-self", "Include {d}/config\n", expect="both-refuse", refusal="Include nests deeper"),
    Case("include-world-writable", "Include {d}/inc.conf\n", files={"inc.conf": "User x\n"},
         modes={"inc.conf": 0o666}, expect="both-refuse", refusal="Bad owner or permissions"),
    Case("include-other-owner", "Include {d}/inc.conf\n", files={"inc.conf": "User x\n"},
         owners={"inc.conf": "nobody"}, expect="both-refuse", refusal="Bad owner or permissions"),
    Case("include-group-writable-own-group", "Include {d}/inc.conf\n", files={"inc.conf": "User grp\n"},
         modes={"inc.conf": 0o664}),
    # route
    Case("proxycommand-none-then-proxyjump", "Host web1\n    ProxyCommand none\nHost *\n    ProxyJump bastion\n"),
    Case("proxyjump-then-proxycommand", "Host web1\n    ProxyJump admin@bastion:2200\nHost * !bastion\n"
                                        "    ProxyCommand nc %h %p\n"),
    Case("hop-proxycommand-refused", "Host web1\n    ProxyJump admin@bastion:2200\nHost *\n"
                                     "    ProxyCommand nc %h %p\n", expect="refuse", refusal="hop .*ProxyCommand"),
    Case("proxyjump-chain", "Host web1\n    ProxyJump j1,ops@j2:2022\n"),
    Case("proxyjump-none", "Host web1\n    ProxyJump none\nHost *\n    ProxyJump bastion\n"),
    Case("proxycommand-refused", "Host web1\n    ProxyCommand nc %h %p\n", expect="refuse", refusal="ProxyCommand"),
    Case("proxyjump-loop", "Host web1\n    ProxyJump web1\n", expect="both-refuse", refusal="jumphost loop"),
    Case("proxyjump-bastion-loop", "Host *\n    ProxyJump bastion\n", expect="refuse", refusal="jumphost loop"),
    Case("proxyjump-bastion-through-itself", "Host bastion\n    HostName 10.0.0.9\nHost *\n    ProxyJump bastion\n",
         expect="refuse", refusal="own ProxyJump"),
    # inventory values as the command line
    Case("inventory-key-plus-config", "Host web1\n    IdentityFile {d}/cfgkey\n", keys=("invkey",)),
    Case("inventory-known-hosts-wins", "Host web1\n    UserKnownHostsFile {d}/cfg_known\n",
         known=("{d}/inv_known",)),
    Case("inventory-port-wins", "Host web1\n    Port 2200\n", port=2300),
    # trust options proofbot does not implement: refused with the line
    Case("checkhostip-refused", "Host web1\n    CheckHostIP yes\n", expect="refuse", refusal="CheckHostIP"),
    Case("knownhostscommand-refused", "Host web1\n    KnownHostsCommand /bin/true %h\n", expect="refuse",
         refusal="KnownHostsCommand"),
    Case("stricthostkeychecking-no-not-taken", "Host web1\n    StrictHostKeyChecking no\n    User ops\n"),
    Case("unknown-option", "Host web1\n    FooBar yes\n", expect="both-refuse", refusal="Bad configuration option"),
    Case("bad-flag-value", "Host other\n    Compression maybe\n" + BASIC, expect="both-refuse",
         refusal="unsupported option"),
    Case("extra-argument", "Host web1\n    ServerAliveInterval 30 40\n", expect="both-refuse",
         refusal="extra arguments"),
    Case("bad-time-value", "Host web1\n    ConnectTimeout soon\n", expect="both-refuse", refusal="invalid time"),
    Case("flag-values-any-case", "Host web1\n    BatchMode YES\n    ConnectTimeout 1m30s\n    User ok\n"),
    Case("ignoreunknown", "IgnoreUnknown foo*\nHost web1\n    FooBar yes\n    User ok\n"),
    Case("user-not-a-name", "Host web1\n    User Root\n", expect="refuse", refusal="not a valid user name"),
    # canonicalization (a private /etc/hosts)
    Case("canonicalize-domain", "CanonicalizeHostname yes\nCanonicalDomains fleet.test\n"
                                "Host web1.fleet.test\n    User canon\n", hosts="127.0.0.1 web1.fleet.test\n"),
    Case("canonicalize-not-found-fallback", "CanonicalizeHostname yes\nCanonicalDomains fleet.test\n" + BASIC,
         name="nope", hosts="127.0.0.1 web1.fleet.test\n"),
    Case("canonicalize-no-fallback", "CanonicalizeHostname yes\nCanonicalDomains fleet.test\n"
                                     "CanonicalizeFallbackLocal no\n", name="nope",
         hosts="127.0.0.1 web1.fleet.test\n", expect="both-refuse", refusal="Could not resolve"),
    Case("canonicalize-max-dots", "CanonicalizeHostname yes\nCanonicalDomains fleet.test\nCanonicalizeMaxDots 0\n"
                                  "Host web1.fleet.test\n    User canon\n", name="web1.x",
         hosts="127.0.0.1 web1.x.fleet.test\n"),
    Case("canonicalize-with-jump-is-skipped", "CanonicalizeHostname yes\nCanonicalDomains fleet.test\n"
                                              "Host * !bastion\n    ProxyJump bastion\n",
         hosts="127.0.0.1 web1.fleet.test\n"),
]
