"""Datasette plugins directory (``datasette DB --plugins-dir`` this folder): see proofbot_metadata.py."""
