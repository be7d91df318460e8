"""Strict local fake of the Slack Web API / Socket Mode for proofbot's tests.

Import `FakeSlack` from here; `signing` builds signed HTTP-mode requests.
"""

from . import signing
from .blockkit import validate_blocks
from .records import (
    BOT_ID,
    BOT_USER_ID,
    Call,
    Channel,
    Ephemeral,
    HttpAck,
    Message,
    MessageEdit,
    PendingAck,
    ResponsePost,
    SlackError,
    SocketAck,
    UploadedFile,
    manifest_bot_scopes,
)
from .server import FakeSlack
from .signing import TEAM_ID

__all__ = [
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "Call",
    "Channel",
    "Ephemeral",
    "FakeSlack",
    "HttpAck",
    "Message",
    "MessageEdit",
    "PendingAck",
    "ResponsePost",
    "SlackError",
    "SocketAck",
    "UploadedFile",
    "manifest_bot_scopes",
    "signing",
    "validate_blocks",
]
