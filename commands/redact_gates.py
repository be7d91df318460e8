"""Which of redaction's rules can match a text at all, found in one cheap pass, so ``redact`` runs only those.

Each gate is a NECESSARY condition of its rule: a literal every match of the rule contains (case-sensitive, as
the rule), a word every match contains under ``(?i)`` (looked for in a folded copy), or a small regex every match
contains. A gate that is closed proves its rule cannot match, so skipping it changes nothing; an open gate only
means the exact rule runs. The gates are looked for in the text followed by ``[REDACTED]``: a rule run before
another only ever puts the mask (between brackets, which no gate holds) where text was, so any gate a later rule
could find in the rewritten text is found here already. tests/test_redact_gates.py holds the fast path to the
full one on generated inputs, every rule's own examples among them.
"""

from __future__ import annotations

from commands.lazy_pattern import LazyPattern

MASK = "[REDACTED]"

# The only characters Python's re equates under (?i) to an ASCII letter other than its two cases (U+0130 and
# U+0131 to i, U+017F to s, U+212A to k): folded to that letter, so `word in folded` holds where `(?i)word` matches.
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})

# Every name is_secret_name calls secret holds one of these (its last word, or `apik`+`eys` split in two).
NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "dsn", "sig", "apik")
# The programs _PASSWORD_OPTION knows (``sshpass`` holds ``pass``).
PROGRAM_WORDS = ("mysql", "mariadb", "pass", "docker", "podman", "mongo", "redis-cli", "curl")
# _TOKEN_SHAPES' prefixes (case-sensitive).
TOKEN_LITERALS = ("xox", "xapp-", "sk-", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "glpat-", "AKIA", "npm_")


class Gate:
    """Open on a text that holds any of ``literals``, any of ``words`` under (?i), or a match of ``pattern``.

    Hashed by identity (a set of them is asked per rule) and never changed once made. A plain class, not a frozen
    dataclass: generating one's methods costs a cold process ~0.5 ms of CPU (issue 27).
    """

    __slots__ = ("literals", "pattern", "words")

    def __init__(self, literals: tuple[str, ...] = (), words: tuple[str, ...] = (),
                 pattern: LazyPattern | None = None) -> None:
        self.literals = literals
        self.words = words
        self.pattern = pattern  # compiled on a text's first look (commands.lazy_pattern)

    def __repr__(self) -> str:
        return f"Gate(literals={self.literals!r}, words={self.words!r}, pattern={self.pattern!r})"


_PRIVATE_KEY_LINES = ("BEGIN DSA PRIVATE KEY", "BEGIN EC PRIVATE KEY", "BEGIN OPENSSH PRIVATE KEY",
                      "BEGIN PGP PRIVATE KEY BLOCK", "BEGIN PRIVATE KEY", "BEGIN RSA PRIVATE KEY",
                      "BEGIN SSH2 ENCRYPTED PRIVATE KEY", "PuTTY-User-Key-File-2")

# commands.secret_shapes' patterns by their text: what each match must hold. A pattern not here (an upgrade's new
# one, or Discord's bot token with no literal) always runs.
DETECTOR_GATES: dict[str, Gate] = {
    '(?:\\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\\s|"|$)': Gate(("AKC",)),
    '(?:\\s|=|:|"|^)AP[\\dABCDEF][a-zA-Z0-9]{8,}(?:\\s|"|$)': Gate(("AP",)),
    '(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}': Gate(("A3T", "ABIA", "ACCA", "AKIA", "ASIA")),
    'aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\\\'\\"]([0-9a-zA-Z/+]{40})[\\\'\\"]': Gate(words=("aws",)),
    'AccountKey=[a-zA-Z0-9+\\/=]{88}': Gate(("AccountKey=",)),
    "://[^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+:([^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+)@": Gate(("://",)),
    '(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}': Gate(("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    '(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)': Gate(("glpat-", "gldt-", "glft-", "glsoat-",
                                                                         "glrt-")),
    'GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)': Gate(("GR1348941",)),
    'glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)': Gate(("glcbt-",)),
    'glimt-[A-Za-z0-9_\\-]{25}(?!\\w)': Gate(("glimt-",)),
    'glptt-[A-Za-z0-9_\\-]{40}(?!\\w)': Gate(("glptt-",)),
    'glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)': Gate(("glagent-",)),
    'gloas-[A-Za-z0-9_\\-]{64}(?!\\w)': Gate(("gloas-",)),
    # IBM COS HMAC: `secret[-_]?(?:access)?[-_]?key` is in every match
    '(?:(?<=\\W)|(?<=^))(?:\\[|)(?:"|\\\'|)(?:(?:ibm)?[-_]?cos[-_]?(?:hmac)?|)(?:_|-|)(?:secret[-_]?(?:access)?[-_]?key)'
    '(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([a-f0-9]{48}(?![a-f0-9]))(?:"|\\\'|)':
        Gate(words=("secret",)),
    'eyJ[A-Za-z0-9-_=]+\\.[A-Za-z0-9-_=]+\\.?[A-Za-z0-9-_.+/=]*?': Gate(("eyJ",)),
    '[0-9a-z]{32}-us[0-9]{1,2}': Gate(("-us",)),
    'sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}': Gate(("T3BlbkFJ",)),
    **{line: Gate((line,)) for line in _PRIVATE_KEY_LINES},
    'pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}': Gate(("pypi-AgEIcHlwaS5vcmc",)),
    'pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}': Gate(("pypi-AgENdGVzdC5weXBpLm9yZw",)),
    'SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}': Gate(("SG.",)),
    'xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+': Gate(words=("xox",)),
    'https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+': Gate(("://",)),
    'sq0csp-[0-9A-Za-z\\\\\\-_]{43}': Gate(("sq0csp-",)),
    '(?:r|s)k_live_[0-9a-zA-Z]{24}': Gate(("k_live_",)),
    '\\d{8,10}:[0-9A-Za-z_-]{35}': Gate(pattern=LazyPattern(r"\d{8}:")),
    # `AC`/`SK` alone is in the mask (`REDACTED`) and in much prose: the next character narrows it
    'AC[a-z0-9]{32}': Gate(pattern=LazyPattern("AC[a-z0-9]")),
    'SK[a-z0-9]{32}': Gate(pattern=LazyPattern("SK[a-z0-9]")),
}



class Gates:
    """Gates whose literals, words and regexes are each looked for once per text: ``open`` says which are open."""

    def __init__(self, gates: tuple[Gate, ...]) -> None:
        self.by_literal: dict[str, set[Gate]] = {}
        self.by_word: dict[str, set[Gate]] = {}
        self.by_pattern: dict[LazyPattern, set[Gate]] = {}
        for gate in gates:
            for literal in gate.literals:
                self.by_literal.setdefault(literal, set()).add(gate)
            for word in gate.words:
                self.by_word.setdefault(word, set()).add(gate)
            if gate.pattern is not None:
                self.by_pattern.setdefault(gate.pattern, set()).add(gate)

    def open(self, text: str) -> set[Gate]:
        text = f"{text}\x00{MASK}"
        folded = text.lower() if text.isascii() else text.translate(_FOLD).lower()
        found: set[Gate] = set()
        for literal, gates in self.by_literal.items():
            if literal in text:
                found |= gates
        for word, gates in self.by_word.items():
            if word in folded:
                found |= gates
        for pattern, gates in self.by_pattern.items():
            if pattern.compiled.search(text):
                found |= gates
        return found


# redact.py's own rules' gates
NAMES = Gate(words=NAME_WORDS)  # a secret-named key, flag or word (is_secret_name decides)
PEM = Gate(("-----BEGIN ",))
HEADER = Gate(words=("auth", "cookie"))
URL = Gate(("://",))
PROGRAMS = Gate(words=PROGRAM_WORDS)
PGPASS = Gate(pattern=LazyPattern(r":[0-9*]"))  # `:port:` or `:*:`
WORD_QUOTED = Gate(words=(*NAME_WORDS, "identified"))
BEARER = Gate(words=("bearer", "token"))
TOKEN_SHAPES = Gate(TOKEN_LITERALS)
RULE_GATES = (NAMES, PEM, HEADER, URL, PROGRAMS, PGPASS, WORD_QUOTED, BEARER, TOKEN_SHAPES)
