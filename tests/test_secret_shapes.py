"""Tier 1: redaction's token shapes are exactly the regex plugins detect-secrets itself finds (but NOT_SECRETS').

commands.secret_shapes writes them out so a verify need not import detect-secrets (and its `requests`); this
test is what keeps that table the library's: a detect-secrets upgrade that adds, drops or changes a plugin fails
here, and the table is regenerated from the printed expectation.
"""

from __future__ import annotations

import re
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector

from commands.redact import _detector_patterns, redact
from commands.secret_shapes import DETECTOR_PATTERNS, NOT_SECRETS


def detect_secrets_regex_plugins() -> list[tuple[str, re.Pattern[str]]]:
    """Every RegexBasedDetector detect-secrets registers, with each pattern of its ``denylist``, in its order."""
    plugins: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
    return [(detector.__name__, pattern) for detector in plugins.values() if issubclass(detector, RegexBasedDetector)
            for pattern in detector.denylist]


def test_the_table_is_detect_secrets_regex_plugins_but_the_unsafe_ones() -> None:
    library = [(name, pattern.pattern, pattern.flags) for name, pattern in detect_secrets_regex_plugins()
               if name not in NOT_SECRETS]
    ours = [(name, pattern, re.compile(pattern, flags).flags) for name, pattern, flags in DETECTOR_PATTERNS]
    assert ours == library


def test_every_plugin_left_out_is_one_detect_secrets_has() -> None:
    assert NOT_SECRETS <= {name for name, _pattern in detect_secrets_regex_plugins()}


def test_redaction_compiles_the_table_and_masks_its_shapes() -> None:
    assert [p.pattern for p, _gate in _detector_patterns()] == [pattern for _n, pattern, _f in DETECTOR_PATTERNS]
    sendgrid = "SG." + "a" * 22 + "." + "b" * 43  # a shape only detect-secrets' plugins know
    assert redact(f"mail relay uses {sendgrid} today") == "mail relay uses [REDACTED] today"
