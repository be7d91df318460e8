"""proofbot test suite."""
