"""redact's gates skip only rules that cannot match: the gated path and the full one give the same text.

Generated inputs: strings every rule's own regex matches (hypothesis ``from_regex``), each detect-secrets
pattern's, mixed with words that open and close gates, and the characters Python's re folds to ASCII letters.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands import redact as redact_module
from commands import redact_gates
from commands.lazy_pattern import LazyPattern
from commands.redact import MASK, _detector_patterns, _redact, redact
from commands.secret_shapes import DETECTOR_PATTERNS

# A pattern with no literal in every match (Discord's bot token): it always runs, ungated.
UNGATED = {pattern for plugin, pattern, _flags in DETECTOR_PATTERNS if plugin == "DiscordBotTokenDetector"}

RULES = [value.compiled for name, value in vars(redact_module).items()
         if name.isupper() and isinstance(value, LazyPattern)]
SHAPES = [re.compile(pattern, flags) for _plugin, pattern, flags in DETECTOR_PATTERNS]
# The words and pieces gates look for, and separators, so generated texts join rules' matches the way config does.
PIECES = ["password", "db_password", "PASSWORD", "\u212aey", "pa\u017f\u017fword", "apik_eys", "sig", "dsn",
          "token", "auth", "Authorization: ", "cookie=", "bearer ", "identified by ", "mysql -p", "curl -u a:",
          "redis-cli -a ", "https://", "://u:p@h", "-----BEGIN RSA PRIVATE KEY-----\n",
          "-----END RSA PRIVATE KEY-----", MASK, "\\\n", "=", ": ", ":5432:", ":*:", '"', "'", " ", "\n", "\t",
          "+", "-", "|", ">", "x", "AC", "SK", "aws", "AKIA", "ghp_", "xox", "eyJ", "SG.", "-us", "12345678:",
          "<password>", "</password>", "config set "]


def both(text: str) -> tuple[str, str]:
    return _redact(text, gated=True), _redact(text, gated=False)


def test_every_detect_secrets_pattern_but_discords_has_a_gate() -> None:
    """A gate keyed by a mistyped pattern would leave it ungated (slow, not unsafe): each is matched here."""
    assert {pattern for _plugin, pattern, _flags in DETECTOR_PATTERNS} - set(redact_gates.DETECTOR_GATES) == UNGATED
    assert set(redact_gates.DETECTOR_GATES) <= {pattern for _plugin, pattern, _flags in DETECTOR_PATTERNS}
    assert [gate is None for _pattern, gate in _detector_patterns()].count(True) == len(UNGATED)


def test_the_mask_alone_opens_no_gate() -> None:
    """Gates are looked for in the text followed by the mask: the mask itself must leave them closed, or a
    redacted text would run every rule again."""
    gates = redact_gates.Gates((*redact_gates.RULE_GATES, *redact_gates.DETECTOR_GATES.values()))
    assert gates.open("") == set()
    assert gates.open(f"{MASK} {MASK}\n") == set()


@pytest.mark.parametrize("text", [
    "coo\u212aie: session=abc123",  # Kelvin sign: re's (?i) reads it as k, so the folded gate must too
    "export DB_PA\u017f\u017fWORD hunter2 --pa\u017f\u017fword=hunter2", "Authorization: Bearer abcdefgh12345",
    "apik_eys: hunter2",  # is_secret_name joins the last two words: `apik` + `eys`
    "aws_secret = 'AKIAIOSFODNN7EXAMPLEwJalrXUtnFEMI/K7MDENG/bPxRfiCY'",
    "sid ACabcdefabcdefabcdefabcdefabcdefab", "t=12345678:AAbbccddeeffgghhiijjkkllmmnnooppqqr",
])
def test_folded_and_narrow_gates_mask_as_the_full_path(text: str) -> None:
    gated, full = both(text)
    assert gated == full
    assert MASK in gated


@pytest.mark.parametrize("word", sorted({*redact_module._SECRET_WORDS, *redact_module._SECRET_SUFFIXES}))
def test_every_secret_word_opens_the_name_gate(word: str) -> None:
    """is_secret_name's every word and suffix, as a key in any case (masked), glued and as a flag (as the full
    path does)."""
    for text in (f"db_{word}=hunter2", f"{word.upper()}: hunter2", f"my{word}: hunter2", f"run --{word} hunter2"):
        gated, full = both(text)
        assert gated == full
    assert both(f"db_{word}=hunter2")[0] == f"db_{word}={MASK}"
    assert both(f"{word.upper()}: hunter2")[0] == f"{word.upper()}: {MASK}"


def _from(pattern: re.Pattern[str]) -> st.SearchStrategy[str]:
    try:
        return st.from_regex(pattern)
    except Exception:  # a conditional group hypothesis cannot generate from: the pieces cover that rule
        return st.nothing()


_matches = st.one_of(*(_from(pattern) for pattern in [*SHAPES, *RULES]))
_texts = st.lists(st.one_of(_matches, st.sampled_from(PIECES), st.text(max_size=12)), max_size=8).map("".join)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_texts)
def test_gated_and_full_redaction_agree(text: str) -> None:
    gated, full = both(text)
    assert gated == full


@pytest.mark.parametrize("pattern", [*SHAPES, *RULES], ids=lambda pattern: pattern.pattern[:40])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_rule_and_shape_example_agrees(pattern: re.Pattern[str], data: st.DataObject) -> None:
    """Each rule's and shape's own matches, alone and inside lines of config."""
    example = data.draw(_from(pattern))
    for text in (example, f"x = 1\n{example}\npassword: {example}", f"curl -H 'Authorization: {example}'"):
        gated, full = both(text)
        assert gated == full, text


def test_redact_still_masks_through_the_gates() -> None:
    assert redact("DB_PASSWORD=hunter2\nkey id AKIAIOSFODNN7EXAMPLE") == f"DB_PASSWORD={MASK}\nkey id {MASK}"
