"""The one redaction layer: every command, output, diff, plan, audit detail and message passes here.

Two sources of rules. Token *shapes* (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT,
PyPI, npm, private-key headers, URL credentials…) come from detect-secrets' regex plugins,
a maintained catalogue; each match's secret groups are masked where they stand. Config
*syntax* is ours, because a detector built to scan source files looks for shapes, not for
``password: hunter2`` in YAML, ``key = x`` in INI, ``"api_key": "x"`` in JSON, ``--token X``
on a command line, ``Authorization: Basic …`` in a header, ``-----BEGIN … PRIVATE KEY-----``
blocks (also cut or inside a diff), URL passwords with ``/`` in them, or any of those
behind a diff's ``+``/``-``/`` `` prefix.

Secret names are judged by the LAST word of a key (``db_password``, ``OPENAI_KEY``,
``authToken``, ``X-API-Key``), so ``max_tokens`` or ``KeyringMode`` stay readable. A key that
starts a line (after a diff prefix and indentation) takes the rest of the line as its
value: config values may hold spaces. Mid-line (a command line, a query string) the value
ends at whitespace, a quote or ``&``. Over-masking is the accepted failure; a leak is not.

Redaction is CPU work proportional to the text: callers trim first (``commands.findings.trim``)
and large texts go through ``redact_off_loop`` so the event loop keeps answering.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

MASK = "[REDACTED]"
OFF_LOOP_CHARS = 32_000  # below this, redaction costs less than a thread hop
T = TypeVar("T")

# Public addresses are evidence here (where a host is), not secrets.
_NOT_SECRETS = {"IPPublicDetector"}


_detector_lock = threading.Lock()
_detector: tuple[re.Pattern[str], ...] | None = None


def _detector_patterns() -> tuple[re.Pattern[str], ...]:
    """detect-secrets' regex plugins' patterns, loaded on first use (by any thread, once).

    Loading them imports ~0.1 s of CPU (requests among it): a verify spends that in the audit
    writer's thread while its SSH handshake is in flight, not before it starts.
    """
    global _detector
    if _detector is not None:
        return _detector
    with _detector_lock:
        if _detector is None:
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
            from detect_secrets.plugins.base import RegexBasedDetector

            patterns: list[re.Pattern[str]] = []
            plugins: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
            for detector in plugins.values():  # ``denylist`` is a class attribute on each regex plugin
                if issubclass(detector, RegexBasedDetector) and detector.__name__ not in _NOT_SECRETS:
                    patterns.extend(cast("Iterable[re.Pattern[str]]", detector.denylist))
            _detector = tuple(patterns)
        return _detector

# Words that make a key secret when they END its name (split at _ - . and camelCase).
_SECRET_WORDS = frozenset({
    "password", "passwd", "pwd", "pass", "passphrase", "secret", "token", "key", "apikey", "auth",
    "credential", "credentials", "dsn", "privatekey", "secretkey", "accesskey", "authtoken", "accesstoken",
})
# Long enough to count as a suffix glued to another word (PGPASSWORD, csrftoken).
_SECRET_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "apikey")
_WORD_SPLIT = re.compile(r"[_.\-\s]+|(?<=[a-z0-9])(?=[A-Z])")
_HARMLESS_VALUE = re.compile(r"(?i)(?:true|false|null|none|~|yes|no|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\[REDACTED\].*)")

_PEM_BLOCK = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.DOTALL)
# A PEM body line seen without its BEGIN line (a diff hunk, a trimmed middle). Pure hex is
# left alone: hashes are evidence.
_BASE64_LINE = re.compile(r"(?m)^([+\- \t]*)(?=[A-Za-z0-9+/]*[G-Zg-z+/])[A-Za-z0-9+/]{40,}={0,2}[ \t]*$")
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|(?:set-)?cookie)([\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"((?:basic|bearer|token|digest|negotiate|ntlm|apikey|aws4-hmac-sha256)[ \t]+)?([^\s\"'][^\n\"']*)")
_BEARER = re.compile(r"(?i)\b(bearer|token)[ \t]+(?!\[REDACTED\])([A-Za-z0-9._~+/=-]{8,})")
_TOKEN_SHAPES = re.compile(
    r"\b(?:xox[abposr]-[A-Za-z0-9-]{6,}|xapp-[A-Za-z0-9-]{6,}|sk-[A-Za-z0-9_-]{12,}|hf_[A-Za-z0-9]{12,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16})")
# scheme://user:password@host: the password may hold '/' or '@'; the LAST '@' of the word ends it.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/?#@:'\"]*:)([^\s'\"<>]+)(@[^\s@'\"<>/]+)")
_SECRET_FLAG = (r"--?(?!no[-_])(?:[A-Za-z0-9]+[-_])*"
                r"(?:api[-_]?key|key|token|secret|passphrase|password|passwd|pass|auth|credentials?)")
# The value after a blank must not be an assignment (``-db_password = x`` is a diff line, not a flag).
_FLAG_WITH_VALUE = re.compile(rf"(?i)(?<![\w-])({_SECRET_FLAG})(=|[ \t\x00]+)(?![=:])(?!--)([^\s\x00]+)")
_PASSWORD_OPTION = re.compile(
    r"(?i)\b((?:mysql\w*|mariadb[\w-]*|mysqldump)\b[^\n\x00]*?[\s\x00]-p[ \t\x00]*"
    r"|(?:sshpass|docker[ \t]+login|podman[ \t]+login)\b[^\n\x00]*?[\s\x00]-p[ \t\x00]+"
    r"|redis-cli\b[^\n\x00]*?[\s\x00]-a[ \t\x00]+"
    r"|curl\b[^\n\x00]*?[\s\x00](?:-u|--user)[ \t\x00=]+[^:\s\x00]*:)([^\s\x00]+)")
_KEY = r"[A-Za-z_][A-Za-z0-9_.\-]*"
# Only the key and the separator: the value is measured by hand, so a key that is no secret
# (``https:`` before ``//h/?token=x``) does not swallow a secret one behind it.
_ASSIGNMENT = re.compile(
    rf"(?m)(?P<start>^[+\- \t]*(?:export[ \t]+)?)?(?(start)|(?<![A-Za-z0-9_.]))"
    rf"(?P<q>[\"']?)(?P<key>{_KEY})(?P=q)(?P<sep>[ \t]*(?::=|=>|=|:)[ \t]*)")
_DOUBLE_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SINGLE_QUOTED = re.compile(r"'([^'\n]*)'")
_MID_LINE_VALUE = re.compile(r"[^\s\"'&\x00]+")
_JSON_VALUE = re.compile(r"[^\s\"'&\x00,}\]]+")
_LINE_VALUE = re.compile(r"[^\n\x00]+")
_BLOCK_SCALAR = re.compile(rf"^([+\- ]?)([ \t]*)(?:-[ \t]+)?({_KEY})[ \t]*:[ \t]*[|>][-+0-9]*[ \t]*$")


def is_secret_name(name: str) -> bool:
    """Whether a key, field or variable name says its value is a secret (its last word decides)."""
    words = [w for w in _WORD_SPLIT.split(name.strip("\"'")) if w]
    if not words:
        return False
    last = words[-1].lower()
    return last in _SECRET_WORDS or last.endswith(_SECRET_SUFFIXES)


def _mask_groups(pattern: re.Pattern[str], text: str) -> str:
    """Mask what a detector pattern captures (its groups if it has any, else the whole match), and the
    rest of the token it is glued to: GitHub's group is only the ``ghp`` label of ``ghp_`` + 36
    characters, and the JWT pattern's lazy tail stops before the signature."""
    spans: list[tuple[int, int]] = []
    for match in pattern.finditer(text):
        groups = [i for i in range(1, (pattern.groups or 0) + 1) if match.group(i)]
        for start, end in [match.span(i) for i in groups] if groups else [match.span()]:
            rest = _TOKEN_TAIL.match(text, end)
            spans.append((start, rest.end() if rest else end))
    return _splice(text, spans)


_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-.+/=]+")


def _splice(text: str, spans: Iterable[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last or start == end:
            continue
        out += [text[last:start], MASK]
        last = end
    return "".join(out) + text[last:] if out else text


def _assignment_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for match in _ASSIGNMENT.finditer(text):
        if not is_secret_name(match.group("key")):
            continue
        at = match.end()
        quoted = _DOUBLE_QUOTED.match(text, at) or _SINGLE_QUOTED.match(text, at)
        if quoted:
            start, end = quoted.span(1)
        else:
            # a key that starts a line owns the rest of it; mid-line (a shell word, a query value) a word
            shape = (_LINE_VALUE if match.group("start") is not None
                     else _JSON_VALUE if match.group("q") else _MID_LINE_VALUE)
            bare = shape.match(text, at)
            if bare is None:
                continue
            start, end = at, at + len(bare.group(0).rstrip())
        value = text[start:end]
        if value and not _HARMLESS_VALUE.fullmatch(value):
            spans.append((start, end))
    return spans


def _block_scalars(text: str) -> str:
    """``password: |`` in YAML: the indented lines below it are the value."""
    lines = text.split("\n")
    masking_deeper_than: int | None = None
    for index, line in enumerate(lines):
        body = line[1:] if line[:1] in "+- " else line
        indent = len(body) - len(body.lstrip(" \t"))
        if masking_deeper_than is not None:
            if body.strip() and indent > masking_deeper_than:
                lines[index] = line[: len(line) - len(body) + indent] + MASK
                continue
            masking_deeper_than = None
        header = _BLOCK_SCALAR.match(line)
        if header and is_secret_name(header.group(3)):
            masking_deeper_than = len(header.group(2))
    return "\n".join(lines)


def redact(text: str) -> str:
    """Return text with every secret it can recognise replaced by ``[REDACTED]``."""
    if not text:
        return text
    # The same evidence passes here up to three times (finding, audit log, rendering): short texts
    # are remembered, so the ~100 patterns run over each once.
    return _redact_remembered(text) if len(text) <= REMEMBERED_CHARS else _redact(text)


REMEMBERED_CHARS = 4096  # with 512 entries: at most ~4 MB kept


@functools.lru_cache(maxsize=512)
def _redact_remembered(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    text = _PEM_BLOCK.sub(lambda m: f"-----BEGIN {m.group(1)}-----{MASK}-----END {m.group(1)}-----", text)
    text = _BASE64_LINE.sub(lambda m: m.group(1) + MASK, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + MASK, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    for pattern in _detector_patterns():
        text = _mask_groups(pattern, text)
    text = _PASSWORD_OPTION.sub(lambda m: m.group(1) + MASK, text)
    text = _FLAG_WITH_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    if "|" in text or ">" in text:
        text = _block_scalars(text)
    text = _splice(text, _assignment_spans(text))
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _TOKEN_SHAPES.sub(MASK, text)


def redact_data(value: T) -> T:
    """Redact JSON-like data: every string, and the string value of every secret-named key.

    An absolute path under a secret-named key is kept (``{"server.key": "/etc/ssl/server.key"}``
    names a file; restore needs it back to re-derive its targets).
    """
    return _redact_value(value)  # type: ignore[no-any-return]


def _redact_value(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    secret_key = bool(key) and is_secret_name(key)
    if isinstance(value, str):
        if secret_key and value and not _HARMLESS_VALUE.fullmatch(value) and not _looks_like_path(value):
            return MASK
        return redact(value)
    return value  # numbers: counts keyed by status ("pass": 3) are not secrets


def _looks_like_path(value: str) -> bool:
    return value.startswith("/") and not any(c.isspace() for c in value)


async def redact_off_loop(text: str, redactor: Callable[[str], str] = redact) -> str:
    """Redact a large text in a worker thread so the event loop keeps serving (Slack acks in 3 s)."""
    if len(text) < OFF_LOOP_CHARS:
        return redactor(text)
    return await asyncio.to_thread(redactor, text)
