"""The ciphers and MACs proofbot offers (OpenSSH's default client set, AES-GCM first), and the per-packet cost asyncssh
adds that they make pointless (an empty MSG_IGNORE before every packet).

Measured (docs/benchmarks.md, "SSH packets and ciphers"): asyncssh's chacha20-poly1305 builds new cryptography
contexts for every packet, ~29 us to seal and open one; AES-GCM reuses one AEAD object, ~5 us. Both are in OpenSSH's
default set and both are AEAD; the server picks the first of ours it also has, so a server without GCM still gets
chacha20-poly1305. Key exchange and host key algorithms are never touched here.
"""

from __future__ import annotations

from typing import Any

import asyncssh
from asyncssh.constants import MSG_IGNORE
from asyncssh.encryption import get_encryption_algs
from asyncssh.mac import get_mac_algs
from asyncssh.packet import String

# OpenSSH 9.2's default client Ciphers (``ssh -G``: chacha20-poly1305, aes128/192/256-ctr, aes128/256-gcm), in the
# order proofbot prefers: the same set, nothing OpenSSH's client would not offer.
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
           "aes128-ctr", "aes192-ctr", "aes256-ctr")
# OpenSSH 9.2's default client MACs, its order (only a CTR cipher uses one); asyncssh's own default adds
# hmac-*@ssh.com ones OpenSSH never offers.
MACS = ("umac-64-etm@openssh.com", "umac-128-etm@openssh.com", "hmac-sha2-256-etm@openssh.com",
        "hmac-sha2-512-etm@openssh.com", "hmac-sha1-etm@openssh.com", "umac-64@openssh.com", "umac-128@openssh.com",
        "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1")

_EMPTY = String(b"")


def algorithm_options() -> dict[str, Any]:
    """asyncssh keyword arguments: the offered ciphers and MACs, those this asyncssh build supports."""
    have_ciphers = set(get_encryption_algs())
    have_macs = set(get_mac_algs())
    return {"encryption_algs": [name for name in CIPHERS if name.encode() in have_ciphers],
            "mac_algs": [name for name in MACS if name.encode() in have_macs]}


def without_ignore_padding(conn: asyncssh.SSHClientConnection) -> None:
    """Stop asyncssh sending an empty MSG_IGNORE before every encrypted packet after the key exchange.

    That packet is the CBC countermeasure of RFC 4251 9.3.1 (an IV the attacker cannot predict); proofbot offers
    no CBC cipher (``CIPHERS``), and neither AEAD nor CTR modes chain an IV across packets, so it only doubles
    the packets proofbot sends (each sealed, each a send syscall). OpenSSH's client sends none.
    """
    send_packet = conn.send_packet

    def send(pkttype: int, *args: bytes, **kwargs: Any) -> None:
        if pkttype == MSG_IGNORE and args == (_EMPTY,):
            return
        send_packet(pkttype, *args, **kwargs)

    conn.send_packet = send  # type: ignore[method-assign]
