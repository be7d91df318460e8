"""Checks: each is the argv it runs on the host plus a pure parser from output to a Finding."""
