"""Secret redaction, applied to every command and output before it is kept or shown.

Covers secret-looking flags in command lines (``--api-key X``, ``--token=X``), bearer
headers, and well-known token shapes (Slack, OpenAI-style, Hugging Face).
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"

_SECRET_FLAG = r"--?(?:[A-Za-z0-9]+[-_])*(?:api[-_]?key|token|secret|password|passwd|pass|auth|credentials?)"
_FLAG_WITH_VALUE = re.compile(rf"(?i)({_SECRET_FLAG})(=|[ \t\x00]+)([^\s\x00]+)")
_ENV_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Z0-9_]*(?:API_KEY|TOKEN|SECRET|PASSWORD|PASSWD)[A-Z0-9_]*=)([^\s\x00]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|token)\s+([A-Za-z0-9._~+/=-]{8,})")
_TOKEN_SHAPES = re.compile(
    r"\b(?:xox[abposr]-[A-Za-z0-9-]{6,}|xapp-[A-Za-z0-9-]{6,}|sk-[A-Za-z0-9_-]{12,}|hf_[A-Za-z0-9]{12,})"
)
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)([^@\s/]+)(@)")


def redact(text: str) -> str:
    """Return text with every secret it can recognise replaced by a mask."""
    text = _FLAG_WITH_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _ENV_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", text)
    return _TOKEN_SHAPES.sub(MASK, text)
