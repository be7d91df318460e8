"""The one redaction layer: every command, output, diff, plan, audit detail and message passes here.

Two sources of rules. Token *shapes* (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT,
PyPI, npm, private-key headers, URL credentials…) come from detect-secrets' regex plugins (commands.secret_shapes),
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
and large texts go through ``redact_off_loop`` so the event loop keeps answering. A rule runs only when its
gate (``commands.redact_gates``: a literal or word every match of it holds) is in the text. Every rule must
stay linear on one long line a host can write (no two quantifiers that can split the same blanks,
every look-ahead scan bounded): tests/test_redact.py feeds it 200 KB adversarial lines.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from commands import redact_gates as gates
from commands.lazy_pattern import LazyPattern

MASK = "[REDACTED]"
OFF_LOOP_CHARS = 32_000  # below this, redaction costs less than a thread hop
T = TypeVar("T")

_detector_lock = threading.Lock()
_detector: tuple[tuple[LazyPattern, gates.Gate | None], ...] | None = None
_gates: gates.Gates | None = None


def _detector_patterns() -> tuple[tuple[LazyPattern, gates.Gate | None], ...]:
    """detect-secrets' regex plugins' patterns (commands.secret_shapes), listed on first use (by any thread, once),
    each with its gate (None: always run) and compiled when its gate first opens."""
    global _detector, _gates
    if _detector is not None:
        return _detector
    with _detector_lock:
        if _detector is None:
            from commands.secret_shapes import DETECTOR_PATTERNS

            detector = tuple((LazyPattern(pattern, flags), gates.DETECTOR_GATES.get(pattern))
                             for _plugin, pattern, flags in DETECTOR_PATTERNS)
            _gates = gates.Gates((*gates.RULE_GATES, *(gate for _p, gate in detector if gate is not None)))
            _detector = detector
        return _detector


# Words that make a key secret when they END its name (split at _ - . and camelCase).
_SECRET_WORDS = frozenset({
    "password", "passwd", "pwd", "pass", "passphrase", "secret", "token", "key", "apikey", "auth",
    "credential", "credentials", "dsn", "privatekey", "secretkey", "accesskey", "authtoken", "accesstoken",
    # plurals that name only secrets (not ``tokens``: ``max_tokens`` is a count), and URL signatures
    # (Azure SAS ``sig``, S3 ``X-Amz-Signature``, GCS ``X-Goog-Signature``)
    "apikeys", "secrets", "passwords", "passphrases", "sig", "signature",
})
# Long enough to count as a suffix glued to another word (PGPASSWORD, csrftoken).
_SECRET_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "apikey")
_WORD_SPLIT = LazyPattern(r"[_.\-\s]+|(?<=[a-z0-9])(?=[A-Z])")
_HARMLESS_VALUE = LazyPattern(r"(?i)(?:true|false|null|none|~|yes|no|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\[REDACTED\].*)")

_PEM_BLOCK = LazyPattern(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.DOTALL)
# A PEM body line seen without its BEGIN line (a diff hunk, a trimmed middle). Pure hex is
# left alone: hashes are evidence.
_BASE64_LINE = LazyPattern(r"(?m)^([+\- \t]*)(?=[A-Za-z0-9+/]*[G-Zg-z+/])[A-Za-z0-9+/]{40,}={0,2}[ \t]*$")
# The short last line of a PEM body: just before its END line, or just after a masked body line.
_PEM_END = LazyPattern(r"^[+\- \t]*-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_PIECE = LazyPattern(r"^([+\- \t]*)[A-Za-z0-9+/]{2,}={0,2}[ \t]*$")
_MASKED_LINE = LazyPattern(r"^[+\- \t]*\[REDACTED\][ \t]*$")
_AUTH_HEADER = LazyPattern(
    r"(?i)\b((?:proxy-)?authorization|(?:set-)?cookie)([\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"((?:basic|bearer|token|digest|negotiate|ntlm|apikey|aws4-hmac-sha256)[ \t]+)?([^\s\"'][^\n\"']*)")
_BEARER = LazyPattern(r"(?i)\b(bearer|token)[ \t]+(?!\[REDACTED\])([A-Za-z0-9._~+/=-]{8,})")
_DISCORD_WEBHOOK = LazyPattern(r"(?i)\bhttps?://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_\-]+)")
# https://TOKEN@host (git clone with a token as the user): a user name of 8+ characters in an http(s)
# URL is masked; `bob@` and `git@` stay readable.
_URL_USER_TOKEN = LazyPattern(r"(?i)\b((?:git\+)?https?://)([^\s/?#@:'\"<>]{8,})(@[^\s@'\"<>/]+)")
_TOKEN_SHAPES = LazyPattern(
    r"\b(?:xox[abposr]-[A-Za-z0-9-]{6,}|xapp-[A-Za-z0-9-]{6,}|sk-[A-Za-z0-9_-]{12,}|hf_[A-Za-z0-9]{12,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|npm_[A-Za-z0-9]{36})")
# scheme://user:password@host: the password may hold '/' or '@'; the LAST '@' of the word ends it.
# At most 256 characters of password: a bounded look back for the '@' from each `scheme://`, so a long
# line of `https://x` repeated is linear (unbounded, 200 KB of it took 11 s).
_URL_PASSWORD = LazyPattern(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/?#@:'\"]*:)([^\s'\"<>]{1,256})(@[^\s@'\"<>/]+)")
_SECRET_FLAG = (r"--?(?!no[-_])(?:[A-Za-z0-9]+[-_])*"
                r"(?:api[-_]?key|key|token|secret|passphrase|password|passwd|pass|auth|credentials?)")
# The value after a blank must not be an assignment (``-db_password = x`` is a diff line, not a flag).
_FLAG_WITH_VALUE = LazyPattern(rf"(?i)(?<![\w-])({_SECRET_FLAG})(=|(?:[ \t\x00]|\\\n[+\- ]?)+)(?![=:])(?!--)"
                              r"((?:[^\s\x00\\]|\\(?!\n))+)")
# The option is looked for within 400 characters of the program's name: a bounded scan per name,
# so a long line of repeated names costs linear time, not quadratic.
_PASSWORD_OPTION = LazyPattern(
    r"(?i)\b((?:mysql\w*|mariadb[\w-]*|mysqldump)\b[^\n\x00]{0,400}?[\s\x00]-p[ \t\x00]*"
    r"|(?:sshpass|docker[ \t]+login|podman[ \t]+login|mongo(?:sh|dump|restore|export|import|stat|top)?)\b"
    r"[^\n\x00]{0,400}?[\s\x00]-p[ \t\x00]+"
    r"|redis-cli\b[^\n\x00]{0,400}?[\s\x00]-a[ \t\x00]+"
    r"|curl\b[^\n\x00]{0,400}?[\s\x00](?:-u|--user)[ \t\x00=]+[^:\s\x00]*:)((?:[^\s\x00\\]|\\(?!\n))+)")
# `password X` (.netrc: on a line of its own, or after `login NAME` / `machine HOST`)
_NETRC_PASSWORD = LazyPattern(r"(?im)(?:^[+\- \t]*|(?<![\w-])(?:login|machine|account)[ \t]+\S+[ \t]+)"
                             r"(?:password|passwd)[ \t]+(?!\[REDACTED\])(?![=:])([^\s\\]+)")
# A secret word (or SQL's IDENTIFIED BY) then a quoted string: `WITH PASSWORD 'x'`, `secret "x"`.
_WORD_THEN_QUOTED = LazyPattern(r"(?i)(?<![\w.\-])(?:(?P<key>[A-Za-z_][\w.\-]*)|identified[ \t]+by)[ \t]+"
                               r"(?P<q>['\"])(?P<v>(?:(?!(?P=q))[^\\\n]|\\.)*)(?P=q)")
# A quoted secret name, a comma, a quoted value: PHP `define('DB_PASSWORD', 'x')`, ("token", "x").
_QUOTED_PAIR = LazyPattern(r"(?P<kq>['\"])(?P<key>[A-Za-z_][\w.\-]*)(?P=kq)[ \t]*,[ \t]*"
                          r"(?P<q>['\"])(?P<v>(?:(?!(?P=q))[^\\\n]|\\.)*)(?P=q)")
# <password>x</password>, <client_secret attr="…">x</client_secret>
_XML_ELEMENT = LazyPattern(r"<(?P<key>[A-Za-z_][\w.\-]*)(?:[ \t][^<>\n]{0,400})?>(?P<v>[^<]{1,4000})</(?P=key)[ \t]*>")
# aws configure set aws_secret_access_key X, npm config set //registry/:_authToken X
_CONFIG_SET = LazyPattern(r"(?i)\bconfig(?:ure)?[ \t]+set[ \t]+(?P<key>[^\s=]+)[ \t]+(?P<v>(?:[^\s\\]|\\(?!\n))+)")
# .pgpass: host:port:database:user:password (`\:` escapes a colon in any field)
_PGPASS_FIELD = r"(?:[^:\\\s]|\\.)*"  # no blank in a host, database or user name: prose is not a .pgpass line
_PGPASS = LazyPattern(rf"(?m)^[+\- ]?[^\s:#+\-]{_PGPASS_FIELD}:(?:[0-9]+|\*):{_PGPASS_FIELD}:{_PGPASS_FIELD}:"
                     r"((?:[^:\\\s]|\\.)(?:[^:\\\n]|\\.)*)$")
# A masked value ended by a line continuation: the next line's first word is the rest of it.
_CONTINUED = LazyPattern(r"\[REDACTED\]\\\n([+\- ]?[ \t]*)(?!\[REDACTED\])([^\s\\]+)")
_EMPTY_VALUE_LINE = LazyPattern(r"(?m):[ \t]*$")
_KEY = r"[A-Za-z_][A-Za-z0-9_.\-]*"
# Only the key and the separator: the value is measured by hand, so a key that is no secret
# (``https:`` before ``//h/?token=x``) does not swallow a secret one behind it.
_ASSIGNMENT = LazyPattern(
    rf"(?m)(?P<start>^[+\- \t]*(?:export[ \t]+)?)?(?(start)|(?<![A-Za-z0-9_.]))"
    rf"(?P<q>[\"']?)(?P<key>{_KEY})(?P=q)(?P<sep>[ \t]*(?::=|=>|=|:)[ \t]*)")
_DOUBLE_QUOTED = LazyPattern(r'"((?:[^"\\\n]|\\.)*)"')
_SINGLE_QUOTED = LazyPattern(r"'([^'\n]*)'")
# Values stop before a line continuation (`\` at the end of a line): _CONTINUED masks what follows.
_MID_LINE_VALUE = LazyPattern(r"(?:[^\s\"'&\x00\\]|\\(?!\n))+")
_JSON_VALUE = LazyPattern(r"(?:[^\s\"'&\x00,}\]\\]|\\(?!\n))+")
_LINE_VALUE = LazyPattern(r"(?:[^\n\x00\\]|\\(?!\n))+")
_LIST_VALUE = LazyPattern(r"\[([^\[\]]{0,4000})\]")
# `key: |` / `key: >` (block scalar) or `key:` alone (the value on the lines below, or a list)
_BLOCK_SCALAR = LazyPattern(rf"^([+\- ]?)([ \t]*)(?:-[ \t]+)?({_KEY})[ \t]*:[ \t]*([|>][-+0-9]*)?[ \t]*$")


@functools.lru_cache(maxsize=1024)  # the same detail keys come back for every finding of every host
def is_secret_name(name: str) -> bool:
    """Whether a key, field or variable name says its value is a secret (its last word decides)."""
    words = [w for w in _WORD_SPLIT.compiled.split(name.strip("\"'")) if w]
    if not words:
        return False
    last = words[-1].lower()
    return last in _SECRET_WORDS or last.endswith(_SECRET_SUFFIXES) or "".join(words[-2:]).lower() == "apikeys"


def _mask_groups(pattern: re.Pattern[str], text: str) -> str:
    """Mask what a detector pattern captures (its groups if it has any, else the whole match), and the
    rest of the token it is glued to: GitHub's group is only the ``ghp`` label of ``ghp_`` + 36
    characters, and the JWT pattern's lazy tail stops before the signature."""
    spans: list[tuple[int, int]] = []
    for match in pattern.finditer(text):
        groups = [i for i in range(1, (pattern.groups or 0) + 1) if match.group(i)]
        for start, end in [match.span(i) for i in groups] if groups else [match.span()]:
            rest = _TOKEN_TAIL.compiled.match(text, end)
            spans.append((start, rest.end() if rest else end))
    return _splice(text, spans)


_TOKEN_TAIL = LazyPattern(r"[A-Za-z0-9_\-.+/=]+")


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
    for match in _ASSIGNMENT.compiled.finditer(text):
        if not is_secret_name(match.group("key")):
            continue
        at = match.end()
        listed = _LIST_VALUE.compiled.match(text, at) if not text.startswith(MASK, at) else None
        quoted = _DOUBLE_QUOTED.compiled.match(text, at) or _SINGLE_QUOTED.compiled.match(text, at)
        if listed:  # "password": ["x"], "api_keys": [ … ] over lines
            start, end = listed.span(1)
            if listed.group(1).strip():
                spans.append((start, end))
            continue
        if quoted:
            start, end = quoted.span(1)
        else:
            # a key that starts a line owns the rest of it; mid-line (a shell word, a query value) a word
            shape = (_LINE_VALUE if match.group("start") is not None
                     else _JSON_VALUE if match.group("q") else _MID_LINE_VALUE)
            bare = shape.compiled.match(text, at)
            if bare is None:
                continue
            start, end = at, at + len(bare.group(0).rstrip())
        value = text[start:end]
        if value and not _HARMLESS_VALUE.compiled.fullmatch(value):
            spans.append((start, end))
    return spans


def _block_scalars(text: str) -> str:
    """``password: |`` in YAML: the indented lines below it are the value; after ``password:`` alone, the
    value is on the lines below too (a plain scalar, or a list, whose ``- `` may sit at the key's indent)."""
    lines = text.split("\n")
    masking_deeper_than: int | None = None
    list_at_indent = False
    for index, line in enumerate(lines):
        body = line[1:] if line[:1] in "+- " else line
        indent = len(body) - len(body.lstrip(" \t"))
        if masking_deeper_than is not None:
            item = list_at_indent and indent == masking_deeper_than and body.lstrip(" \t").startswith("- ")
            if body.strip() and (indent > masking_deeper_than or item):
                lines[index] = line[: len(line) - len(body) + indent] + ("- " if item else "") + MASK
                continue
            masking_deeper_than = None
        header = _BLOCK_SCALAR.compiled.match(line)
        if header and is_secret_name(header.group(3)):
            masking_deeper_than, list_at_indent = len(header.group(2)), header.group(4) is None
    return "\n".join(lines)


def _pem_tails(text: str) -> str:
    """The body lines of a PEM key shorter than ``_BASE64_LINE`` needs: those right above its END line
    (a diff shows them with END as context, the BEGIN line far above), and one right below a masked line."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if _PEM_END.compiled.match(line):
            above = index - 1
            while above >= 0 and (piece := _PEM_BODY_PIECE.compiled.match(lines[above])):
                lines[above] = piece.group(1) + MASK
                above -= 1
        elif (index and _MASKED_LINE.compiled.match(lines[index - 1])
              and (piece := _PEM_BODY_PIECE.compiled.match(line))):
            lines[index] = piece.group(1) + MASK
    return "\n".join(lines)


# Alone, these words are too common to make the quoted string after them a secret: ("pass", "skipped").
_WEAK_ALONE = frozenset({"pass", "key", "auth", "sig", "signature"})


def _keyed_spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """The ``v`` group of each match whose ``key`` group names a secret (no ``key`` group: always)."""
    spans = []
    for match in pattern.finditer(text):
        key = match.groupdict().get("key")
        secret = key is None or (is_secret_name(key) and key.lower() not in _WEAK_ALONE)
        if secret and match.group("v") and not match.group("v").startswith(MASK):
            spans.append(match.span("v"))
    return spans


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


def _redact(text: str, gated: bool = True) -> str:
    """Every rule over the text; with ``gated``, only the rules whose gate (commands.redact_gates) is open: a
    closed gate proves its rule matches nothing, so both give the same text (tests/test_redact_gates.py)."""
    detector = _detector_patterns()
    seen = _gates.open(text) if gated and _gates is not None else None

    def may(gate: gates.Gate) -> bool:
        return seen is None or gate in seen

    names = may(gates.NAMES)
    if may(gates.PEM):
        text = _PEM_BLOCK.compiled.sub(lambda m: f"-----BEGIN {m.group(1)}-----{MASK}-----END {m.group(1)}-----", text)
    text = _BASE64_LINE.compiled.sub(lambda m: m.group(1) + MASK, text)
    if "-----END" in text or MASK in text:
        text = _pem_tails(text)
    if may(gates.HEADER):
        text = _AUTH_HEADER.compiled.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + MASK, text)
    if may(gates.URL):
        text = _URL_PASSWORD.compiled.sub(lambda m: m.group(1) + MASK + m.group(3), text)
        text = _URL_USER_TOKEN.compiled.sub(lambda m: m.group(1) + MASK + m.group(3), text)
        text = _DISCORD_WEBHOOK.compiled.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + MASK, text)
    for pattern, gate in detector:
        if gate is None or may(gate):
            text = _mask_groups(pattern.compiled, text)
    if may(gates.PROGRAMS):
        text = _PASSWORD_OPTION.compiled.sub(lambda m: m.group(1) + MASK, text)
    if names:
        text = _FLAG_WITH_VALUE.compiled.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        text = _NETRC_PASSWORD.compiled.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + MASK, text)
    if may(gates.PGPASS):
        text = _PGPASS.compiled.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + MASK, text)
    if names:
        if "|" in text or ">" in text or _EMPTY_VALUE_LINE.compiled.search(text):
            text = _block_scalars(text)
        text = _splice(text, [*_keyed_spans(_QUOTED_PAIR.compiled, text), *_keyed_spans(_XML_ELEMENT.compiled, text),
                              *_keyed_spans(_CONFIG_SET.compiled, text)])
        text = _splice(text, _assignment_spans(text))
    if may(gates.WORD_QUOTED):
        text = _splice(text, _keyed_spans(_WORD_THEN_QUOTED.compiled, text))
    if may(gates.BEARER):
        text = _BEARER.compiled.sub(lambda m: f"{m.group(1)} {MASK}", text)
    if may(gates.TOKEN_SHAPES):
        text = _TOKEN_SHAPES.compiled.sub(MASK, text)
    for _ in range(CONTINUED_LINES):  # a value split over lines with `\`: one more line each pass
        if MASK + "\\\n" not in text:
            break
        text = _CONTINUED.compiled.sub(lambda m: f"{MASK}\\\n{m.group(1)}{MASK}", text)
    return text


CONTINUED_LINES = 8


def redact_data(value: T) -> T:
    """Redact JSON-like data: every string, and the string value of every secret-named key.

    An absolute path under a secret-named key is kept (``{"server.key": "/etc/ssl/server.key"}``
    names a file; restore needs it back to re-derive its targets).
    """
    return _redact_value(value)  # type: ignore[no-any-return]


def _redact_value(value: Any, key: str = "") -> Any:
    # Strings first, the key judged only where it matters: every event and output walks here (issue 27's CPU).
    if isinstance(value, str):
        if (key and value and is_secret_name(key) and not _HARMLESS_VALUE.compiled.fullmatch(value)
                and not _names_a_file(key, value)):
            return MASK
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # {"password": ["x"]}: every item of a secret's list is secret
        inherited = key if key and is_secret_name(key) else ""
        return [_redact_value(v, inherited) for v in value]
    return value  # numbers: counts keyed by status ("pass": 3) are not secrets


_FILE_NAME = LazyPattern(r"[\w@+-][\w.@+-]*\.[A-Za-z0-9]{1,4}")
_FILE_PATH = LazyPattern(r"(?:/[\w.@+-]+){2,}")


def _names_a_file(key: str, value: str) -> bool:
    """``{"server.key": "/etc/ssl/server.key"}``: a backup's file name and its live path, not a secret.
    Only a key shaped like a file name (an extension of 1-4 characters) with a value of two or more path
    components: ``{"password": "/s3cret"}`` or ``{"api_key": "/x/y"}`` is masked."""
    return bool(_FILE_NAME.compiled.fullmatch(key) and _FILE_PATH.compiled.fullmatch(value))


async def redact_off_loop(text: str, redactor: Callable[[str], str] = redact) -> str:
    """Redact a large text in a worker thread so the event loop keeps serving (Slack acks in 3 s)."""
    if len(text) < OFF_LOOP_CHARS:
        return redactor(text)
    return await asyncio.to_thread(redactor, text)
