"""The ``proofbot`` command line: one module per operation, driven by the registry."""
