"""``proofbot demo``: the seed's story on a loopback lab host, and that host (also used by the fast tests)."""
