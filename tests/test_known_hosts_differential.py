"""known_hosts against OpenSSH 9.2 itself: each case is a real ``ssh -o BatchMode=yes -o StrictHostKeyChecking=yes``
login and a login through proofbot's own connect, to the same loopback sshd with the same files.

Each case states what OpenSSH does (checked: the case proves something only if ssh does it), and
proofbot must do the same, or refuse with a reason where the case says proofbot is stricter on
purpose. The sshd's (one per host key / certificate kind) start once for the module; the names
resolve to 127.0.0.1 in a private mount namespace (``unshare -m``), never in the machine's
/etc/hosts. Needs root (sshd); where labs are required (CI) a machine that cannot run it fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.known_hosts_lab import Case, Lab, run_in_namespace, start_lab
from tests.lab import skip_or_fail

BY_IP = "lists this key under 127.0.0.1, which OpenSSH does not look up"
P = "{PORT:plain}"
K = "{KEY:plain}"


def at(server: str) -> str:
    return "[web1.test]:{PORT:" + server + "}"


CASES = [
    # plain keys, hashed names, ports
    Case("plain-with-port", f"[web1.test]:{P} {K}\n", "plain", True),
    Case("plain-without-port", f"web1.test {K}\n", "plain", True),
    Case("hashed-with-port", f"{{HASH:[web1.test]:{P}}} {K}\n", "plain", True),
    Case("hashed-without-port", f"{{HASH:web1.test}} {K}\n", "plain", True),
    Case("hashed-for-another-name", f"{{HASH:web2.test}} {K}\n", "plain", False),
    Case("another-key-under-the-port", f"[web1.test]:{P} {{KEY:good}}\n", "plain", False,
         says='lists another key for [web1.test]:{port}: the host key changed'),
    Case("another-key-under-the-port-blocks-the-portless-one",
         f"[web1.test]:{P} {{KEY:good}}\nweb1.test {K}\n", "plain", False),
    Case("right-key-under-the-port-wrong-without", f"web1.test {{KEY:good}}\n[web1.test]:{P} {K}\n", "plain", True),
    Case("other-port-only", f"[web1.test]:1 {K}\n", "plain", False),
    # the peer's IP is never looked up (CheckHostIP off), and there is no CIDR
    Case("ip-only-with-port", f"[127.0.0.1]:{P} {K}\n", "plain", False,
         says='no key for [web1.test]:{port}'),
    Case("ip-only-without-port", f"127.0.0.1 {K}\n", "plain", False,
         says=BY_IP),
    Case("ip-only-hashed", f"{{HASH:[127.0.0.1]:{P}}} {K}\n", "plain", False,
         says=BY_IP),
    Case("name-and-ip-line", f"web1.test,127.0.0.1 {K}\n", "plain", True),
    Case("cidr-looking", f"127.0.0.0/8 {K}\n", "plain", False),
    Case("ip-wildcard", f"127.0.0.* {K}\n", "plain", False),
    Case("ip-wildcard-with-port", f"[127.0.0.*]:* {K}\n", "plain", False),
    # patterns and negation
    Case("wildcard-name", f"*.test {K}\n", "plain", True),
    Case("wildcard-with-port", f"[*.test]:* {K}\n", "plain", True),
    Case("question-mark", f"web?.test {K}\n", "plain", True),
    Case("negated-self", f"*.test,!web1.test {K}\n", "plain", False),
    Case("negated-other", f"*.test,!web2.test {K}\n", "plain", True),
    Case("negation-only", f"!web2.test {K}\n", "plain", False),
    Case("negation-on-an-earlier-line-only", f"*.test,!web1.test {{KEY:good}}\nweb1.test {K}\n", "plain", True),
    # case, comments, unparsable lines among good ones
    Case("upper-case-in-the-file", f"WEB1.TEST {K}\n", "plain", True),
    Case("upper-case-pattern", f"[WEB?.Test]:{P} {K}\n", "plain", True),
    Case("upper-case-address", f"web1.test {K}\n", "plain", True, name="WEB1.test"),
    Case("unparsable-lines-among-good-ones",
         "# comment\n\n   \nweb1.test\nweb1.test ssh-ed25519\nweb1.test ssh-ed25519 AAAAnotbase64!\n"
         f"@bogus web1.test {K}\nweb1.test ssh-rsa {{BLOB:plain}}\n"
         f"@revoked @cert-authority web1.test {K}\n[web1.test]:{P} {K}\n", "plain", True),
    Case("unparsable-line-under-the-port-is-skipped", f"[web1.test]:{P} ssh-ed25519 AAAAC3Nz\nweb1.test {K}\n",
         "plain", True),
    Case("key-type-name-not-the-blobs", f"[web1.test]:{P} ecdsa-sha2-nistp256 {{BLOB:plain}}\n", "plain", False),
    # @revoked in user and global files, with and without the port
    Case("revoked-with-port-key-without", f"@revoked [web1.test]:{P} {K}\nweb1.test {K}\n", "plain", False,
         says='is marked @revoked in'),
    Case("revoked-in-global", f"[web1.test]:{P} {K}\n", "plain", False, global_=f"@revoked * {K}\n",
         says='is marked @revoked in'),
    Case("revoked-hashed", f"@revoked {{HASH:[web1.test]:{P}}} {K}\nweb1.test {K}\n", "plain", False,
         says='is marked @revoked in'),
    Case("revoked-for-another-host", f"@revoked web2.test {K}\n[web1.test]:{P} {K}\n", "plain", True),
    Case("revoked-with-port-in-user-key-in-global", f"@revoked [web1.test]:{P} {K}\n", "plain", False,
         global_=f"web1.test {K}\n"),
    Case("revoked-without-port-key-with-port", f"[web1.test]:{P} {K}\n", "plain", True,
         global_=f"@revoked web1.test {K}\n", stricter=True),
    Case("revoked-without-port-key-without-port", f"@revoked web1.test {K}\nweb1.test {K}\n", "plain", False,
         says="is marked @revoked in"),
    Case("key-only-in-global", "", "plain", True, global_=f"[web1.test]:{P} {K}\n"),
    # HostKeyAlias: the alias alone is looked up, without the port
    Case("alias", f"myalias {K}\n", "plain", True, alias="myalias"),
    Case("alias-replaces-the-name", f"[web1.test]:{P} {K}\nweb1.test {K}\n", "plain", False, alias="myalias"),
    Case("alias-never-gets-a-port", f"[myalias]:{P} {K}\n", "plain", False, alias="myalias"),
    Case("alias-upper-case", f"myalias {K}\n", "plain", True, alias="MyAlias"),
    # host certificates and @cert-authority scopes
    Case("ca-for-the-domain", "@cert-authority *.test {KEY:ca1}\n", "good", True),
    Case("ca-for-name-with-any-port", "@cert-authority [web1.test]:* {KEY:ca1}\n", "good", True),
    Case("ca-upper-case-pattern", "@cert-authority *.TEST {KEY:ca1}\n", "good", True),
    Case("ca-for-the-portless-name", "@cert-authority web1.test {KEY:ca1}\n", "good", True),
    Case("ca-scope-negated", "@cert-authority *.test,!web1.test {KEY:ca1}\n", "good", False),
    Case("ca-for-ip-patterns-by-name", "@cert-authority [127.0.0.*]:* {KEY:ca1}\n", "good", False),
    Case("ca-for-another-domain", "@cert-authority *.example {KEY:ca1}\n", "good", False),
    Case("ca-revoked", "@cert-authority *.test {KEY:ca1}\n", "good", False, global_="@revoked * {KEY:ca1}\n",
         says='the CA that signed its certificate (SHA256:'),
    Case("ca-trusted-host-key-revoked", "@cert-authority *.test {KEY:ca1}\n@revoked [web1.test]:{PORT:good} "
         "{KEY:good}\n", "good", False,
         says='is marked @revoked in'),
    Case("another-ca-trusted", "@cert-authority *.test {KEY:ca2}\n", "good", False,
         says='its host certificate is signed by CA SHA256:'),
    Case("untrusted-ca-falls-back-to-the-key", "web1.test {KEY:good}\n", "good", True),
    Case("cert-alias-among-principals", "@cert-authority web2.test {KEY:ca1}\n", "good", True, alias="web2.test"),
    Case("cert-alias-not-a-principal", "@cert-authority *.test {KEY:ca1}\n", "good", False, alias="db.test",
         says='its host certificate names web1.test, web2.test, not db.test'),
    Case("cert-name-not-a-principal", "@cert-authority *.test {KEY:ca1}\n", "good", False, name="db.test"),
    Case("cert-wrong-principal", "@cert-authority *.test {KEY:ca1}\n", "wrongp", False,
         says='its host certificate names other.test, not web1.test'),
    Case("cert-wrong-principal-key-listed", "@cert-authority *.test {KEY:ca1}\nweb1.test {KEY:wrongp}\n",
         "wrongp", True),
    Case("cert-wrong-principal-key-listed-and-revoked",
         "@cert-authority *.test {KEY:ca1}\nweb1.test {KEY:wrongp}\n@revoked * {KEY:wrongp}\n", "wrongp", False),
    Case("cert-wrong-principal-key-listed-under-the-port",
         f"@cert-authority *.test {{KEY:ca1}}\n{at('wrongp')} {{KEY:wrongp}}\n", "wrongp", True),
    Case("cert-expired", "@cert-authority *.test {KEY:ca1}\n", "expired", False,
         says='its host certificate expired at 2020-01-02T00:00:00Z'),
    Case("cert-expired-key-listed", f"@cert-authority *.test {{KEY:ca1}}\n{at('expired')} {{KEY:expired}}\n",
         "expired", True),
    Case("cert-not-yet-valid", "@cert-authority *.test {KEY:ca1}\n", "future", False,
         says='its host certificate is not valid before 2099-01-01T00:00:00Z'),
    Case("cert-other-ca", "@cert-authority *.test {KEY:ca1}\n", "otherca", False,
         says='its host certificate is signed by CA SHA256:'),
    Case("cert-other-ca-key-listed", "@cert-authority *.test {KEY:ca1}\nweb1.test {KEY:otherca}\n",
         "otherca", True),
    Case("cert-other-ca-key-listed-ca-revoked", "web1.test {KEY:otherca}\n@revoked * {KEY:ca2}\n",
         "otherca", False,
         says='the CA that signed its certificate (SHA256:'),
    Case("cert-without-principals", "@cert-authority *.test {KEY:ca1}\n", "noprinc", True, name="db.test"),
    Case("cert-sha1-ca-signature", "@cert-authority *.test {KEY:ca3}\n", "sha1ca", False,
         says="is signed with ssh-rsa, which OpenSSH's default CASignatureAlgorithms refuses"),
    Case("cert-sha1-ca-signature-key-listed", "@cert-authority *.test {KEY:ca3}\nweb1.test {KEY:sha1ca}\n",
         "sha1ca", True),
    Case("ca-only-no-certificate-presented", "@cert-authority *.test {KEY:ca1}\n", "plain", False,
         says='only through a host CA'),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    missing = [tool for tool in ("sshd", "ssh", "ssh-keygen", "unshare", "mount")
               if not shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")]
    if os.geteuid() != 0 or missing:
        skip_or_fail("known_hosts differential suite needs root (sshd, a private mount namespace)"
                     + (f" and {', '.join(missing)}" if missing else ""))
    lab: Lab = start_lab(Path(tmp_path_factory.mktemp("known_hosts")))
    try:
        yield run_in_namespace(lab, CASES)
    finally:
        lab.stop()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_proofbot_trusts_what_openssh_trusts(case: Case, results: dict[str, dict[str, Any]]) -> None:
    ssh, proofbot = results[case.id]["ssh"], results[case.id]["proofbot"]
    assert ssh["connects"] is case.ssh_connects, f"OpenSSH did not do what the case says: {ssh['said']}"
    if case.stricter:
        assert not proofbot["connects"] and proofbot["error"] == "HostKeyNotVerified", proofbot
        assert "OpenSSH" in proofbot["said"], proofbot["said"]  # the refusal says it is stricter than ssh
        return
    assert proofbot["connects"] is ssh["connects"], (proofbot, ssh)
    if not proofbot["connects"]:
        said = proofbot["said"]
        assert proofbot["error"] == "HostKeyNotVerified", proofbot
        assert "host key not verified against " in said, said
        assert case.says.replace("{port}", str(results[case.id]["port"])) in said, said
        if any(sign in said for sign in ("@revoked", "host certificate", "the host key changed")):
            # issue 19 item 7: a revoked or mismatched key is never answered with advice to trust it
            assert "do not add or replace this key in known_hosts" in said, said
            assert "before adding it" not in said and "add its own key" not in said, said
