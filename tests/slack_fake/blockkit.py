"""Block Kit validation for the fake Slack server, modelled on Slack's `invalid_blocks` checks.

Messages use Slack's wording: `[ERROR] <reason> [json-pointer:/blocks/0/text/text]`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_BLOCKS = 50
MAX_BLOCK_ID = 255
MAX_ACTION_ID = 255
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_SECTION_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_URL = 3000
MAX_ALT_TEXT = 2000
MAX_IMAGE_TITLE = 2000
MAX_INPUT_LABEL = 2000
MAX_INPUT_HINT = 2000
MAX_MARKDOWN_TOTAL = 12000
MAX_CONFIRM_TITLE = 100
MAX_CONFIRM_TEXT = 300
MAX_CONFIRM_BUTTON = 30
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150

BLOCK_TYPES = frozenset(
    {"section", "context", "divider", "header", "actions", "rich_text", "image", "input", "markdown"}
)
TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})

# Interactive elements accepted in actions/section accessory/input; only `button` is
# validated key-by-key, the others get type, action_id and confirm checks.
_SELECTS = {
    "static_select",
    "external_select",
    "users_select",
    "conversations_select",
    "channels_select",
}
INTERACTIVE_ELEMENTS = frozenset(
    {
        "button",
        "overflow",
        "datepicker",
        "timepicker",
        "datetimepicker",
        "checkboxes",
        "radio_buttons",
        "workflow_button",
        *_SELECTS,
        *{"multi_" + s for s in _SELECTS},
    }
)
INPUT_ONLY_ELEMENTS = frozenset(
    {
        "plain_text_input",
        "email_text_input",
        "url_text_input",
        "number_input",
        "rich_text_input",
        "file_input",
    }
)
RICH_TEXT_CONTAINERS = frozenset(
    {"rich_text_section", "rich_text_list", "rich_text_preformatted", "rich_text_quote"}
)
# inline rich-text element type -> field it requires
RICH_TEXT_INLINE: dict[str, str | None] = {
    "text": "text",
    "link": "url",
    "emoji": "name",
    "user": "user_id",
    "usergroup": "usergroup_id",
    "channel": "channel_id",
    "team": "team_id",
    "date": "timestamp",
    "broadcast": "range",
    "color": "value",
}

_BLOCK_KEYS: dict[str, frozenset[str]] = {
    "section": frozenset({"type", "block_id", "text", "fields", "accessory", "expand"}),
    "context": frozenset({"type", "block_id", "elements"}),
    "divider": frozenset({"type", "block_id"}),
    "header": frozenset({"type", "block_id", "text"}),
    "actions": frozenset({"type", "block_id", "elements"}),
    "rich_text": frozenset({"type", "block_id", "elements"}),
    "image": frozenset({"type", "block_id", "image_url", "slack_file", "alt_text", "title"}),
    "input": frozenset(
        {"type", "block_id", "label", "element", "dispatch_action", "hint", "optional"}
    ),
    "markdown": frozenset({"type", "block_id", "text"}),
}
_BUTTON_KEYS = frozenset(
    {"type", "text", "action_id", "url", "value", "style", "confirm", "accessibility_label"}
)
_CONFIRM_KEYS = frozenset({"title", "text", "confirm", "deny", "style"})
_TEXT_KEYS = {
    "plain_text": frozenset({"type", "text", "emoji"}),
    "mrkdwn": frozenset({"type", "text", "verbatim"}),
}
_IMAGE_ELEMENT_KEYS = frozenset({"type", "image_url", "slack_file", "alt_text"})
_OPTION_ELEMENTS = frozenset(
    {"static_select", "multi_static_select", "overflow", "checkboxes", "radio_buttons"}
)


class _Validator:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.block_ids: set[str] = set()
        self.action_ids: set[str] = set()
        self.markdown_total = 0

    def err(self, reason: str, ptr: str) -> None:
        self.errors.append(f"[ERROR] {reason} [json-pointer:{ptr}]")

    # -- generic helpers -------------------------------------------------
    def keys(self, obj: dict[str, Any], allowed: Iterable[str], ptr: str) -> None:
        allowed_set = set(allowed)
        for key in obj:
            if key not in allowed_set:
                self.err(f"invalid additional property: {key}", ptr)

    def required(self, obj: dict[str, Any], names: Iterable[str], ptr: str) -> bool:
        ok = True
        for name in names:
            if name not in obj or obj[name] is None:
                self.err(f"missing required field: {name}", ptr)
                ok = False
        return ok

    def string(
        self,
        value: Any,
        ptr: str,
        *,
        max_len: int | None = None,
        min_len: int = 0,
    ) -> str | None:
        if not isinstance(value, str):
            self.err("must be a string", ptr)
            return None
        if max_len is not None and len(value) > max_len:
            self.err(f"must be less than {max_len + 1} characters", ptr)
        if len(value) < min_len:
            self.err(f"must be more than {min_len - 1} characters", ptr)
        return value

    def boolean(self, obj: dict[str, Any], key: str, ptr: str) -> None:
        if key in obj and not isinstance(obj[key], bool):
            self.err("must be a boolean", f"{ptr}/{key}")

    def enum(self, value: Any, allowed: Iterable[str], ptr: str) -> None:
        allowed_list = sorted(allowed)
        if value not in allowed_list:
            self.err(f"must be one of {', '.join(allowed_list)}", ptr)

    def obj(self, value: Any, ptr: str) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.err("must be an object", ptr)
            return None
        return value

    def array(
        self, value: Any, ptr: str, *, max_items: int | None = None, min_items: int = 0
    ) -> list[Any] | None:
        if not isinstance(value, list):
            self.err("must be an array", ptr)
            return None
        if max_items is not None and len(value) > max_items:
            self.err(f"no more than {max_items} items allowed", ptr)
        if len(value) < min_items:
            self.err(f"must provide at least {min_items} items", ptr)
        return value

    def text_object(
        self,
        value: Any,
        ptr: str,
        *,
        max_len: int | None,
        types: frozenset[str] = TEXT_TYPES,
    ) -> None:
        text_obj = self.obj(value, ptr)
        if text_obj is None:
            return
        ttype = text_obj.get("type")
        if ttype not in types:
            self.err(f"must be one of {', '.join(sorted(types))}", f"{ptr}/type")
            return
        self.keys(text_obj, _TEXT_KEYS[ttype], ptr)
        if self.required(text_obj, ["text"], ptr):
            self.string(text_obj["text"], f"{ptr}/text", max_len=max_len, min_len=1)
        self.boolean(text_obj, "emoji", ptr)
        self.boolean(text_obj, "verbatim", ptr)

    def block_id(self, block: dict[str, Any], ptr: str) -> None:
        if "block_id" not in block:
            return
        value = self.string(block["block_id"], f"{ptr}/block_id", max_len=MAX_BLOCK_ID, min_len=1)
        if value is None:
            return
        if value in self.block_ids:
            self.err(f"duplicate block_id: {value}", f"{ptr}/block_id")
        self.block_ids.add(value)

    def action_id(self, element: dict[str, Any], ptr: str) -> None:
        if "action_id" not in element:
            return
        value = self.string(
            element["action_id"], f"{ptr}/action_id", max_len=MAX_ACTION_ID, min_len=1
        )
        if value is None:
            return
        if value in self.action_ids:
            self.err(f"duplicate action_id: {value}", f"{ptr}/action_id")
        self.action_ids.add(value)

    # -- composition objects ---------------------------------------------
    def confirm(self, value: Any, ptr: str) -> None:
        confirm = self.obj(value, ptr)
        if confirm is None:
            return
        self.keys(confirm, _CONFIRM_KEYS, ptr)
        self.required(confirm, ["title", "text", "confirm", "deny"], ptr)
        plain = frozenset({"plain_text"})
        if "title" in confirm:
            self.text_object(
                confirm["title"], f"{ptr}/title", max_len=MAX_CONFIRM_TITLE, types=plain
            )
        if "text" in confirm:
            self.text_object(confirm["text"], f"{ptr}/text", max_len=MAX_CONFIRM_TEXT)
        for key in ("confirm", "deny"):
            if key in confirm:
                self.text_object(
                    confirm[key], f"{ptr}/{key}", max_len=MAX_CONFIRM_BUTTON, types=plain
                )
        if "style" in confirm:
            self.enum(confirm["style"], {"primary", "danger"}, f"{ptr}/style")

    def option(self, value: Any, ptr: str) -> None:
        option = self.obj(value, ptr)
        if option is None:
            return
        self.keys(option, {"text", "value", "description", "url"}, ptr)
        if self.required(option, ["text", "value"], ptr):
            self.text_object(option["text"], f"{ptr}/text", max_len=MAX_OPTION_TEXT)
            self.string(option["value"], f"{ptr}/value", max_len=MAX_OPTION_VALUE, min_len=1)
        if "description" in option:
            self.text_object(option["description"], f"{ptr}/description", max_len=MAX_OPTION_TEXT)

    # -- elements ----------------------------------------------------------
    def button(self, element: dict[str, Any], ptr: str) -> None:
        self.keys(element, _BUTTON_KEYS, ptr)
        if self.required(element, ["text"], ptr):
            self.text_object(
                element["text"],
                f"{ptr}/text",
                max_len=MAX_BUTTON_TEXT,
                types=frozenset({"plain_text"}),
            )
        if "value" in element:
            self.string(element["value"], f"{ptr}/value", max_len=MAX_BUTTON_VALUE, min_len=1)
        if "url" in element:
            self.string(element["url"], f"{ptr}/url", max_len=MAX_URL, min_len=1)
        if "style" in element:
            self.enum(element["style"], {"primary", "danger"}, f"{ptr}/style")
        if "accessibility_label" in element:
            self.string(
                element["accessibility_label"],
                f"{ptr}/accessibility_label",
                max_len=MAX_BUTTON_TEXT,
                min_len=1,
            )

    def image_element(self, element: dict[str, Any], ptr: str) -> None:
        self.keys(element, _IMAGE_ELEMENT_KEYS, ptr)
        self.required(element, ["alt_text"], ptr)
        if "alt_text" in element:
            self.string(element["alt_text"], f"{ptr}/alt_text", max_len=MAX_ALT_TEXT, min_len=1)
        if "image_url" not in element and "slack_file" not in element:
            self.err("must provide either image_url or slack_file", ptr)
        if "image_url" in element:
            self.string(element["image_url"], f"{ptr}/image_url", max_len=MAX_URL, min_len=1)

    def element(self, value: Any, ptr: str, allowed: frozenset[str]) -> None:
        element = self.obj(value, ptr)
        if element is None:
            return
        etype = element.get("type")
        if etype not in allowed:
            self.err(f"unsupported element type: {etype!r}", f"{ptr}/type")
            return
        if etype == "image":
            self.image_element(element, ptr)
            return
        self.action_id(element, ptr)
        if etype == "button":
            self.button(element, ptr)
        if "confirm" in element:
            self.confirm(element["confirm"], f"{ptr}/confirm")
        if etype in _OPTION_ELEMENTS and "options" in element:
            options = self.array(element["options"], f"{ptr}/options", max_items=100)
            for i, opt in enumerate(options or []):
                self.option(opt, f"{ptr}/options/{i}")

    # -- blocks --------------------------------------------------------------
    def block(self, value: Any, ptr: str) -> None:
        block = self.obj(value, ptr)
        if block is None:
            return
        btype = block.get("type")
        if btype not in BLOCK_TYPES:
            self.err(f"unsupported block type: {btype!r}", f"{ptr}/type")
            return
        self.keys(block, _BLOCK_KEYS[btype], ptr)
        self.block_id(block, ptr)
        getattr(self, f"block_{btype}")(block, ptr)

    def block_section(self, block: dict[str, Any], ptr: str) -> None:
        if "text" not in block and "fields" not in block:
            self.err("must provide either text or fields", ptr)
        if "text" in block:
            self.text_object(block["text"], f"{ptr}/text", max_len=MAX_SECTION_TEXT)
        if "fields" in block:
            fields = self.array(
                block["fields"], f"{ptr}/fields", max_items=MAX_SECTION_FIELDS, min_items=1
            )
            for i, field in enumerate(fields or []):
                self.text_object(field, f"{ptr}/fields/{i}", max_len=MAX_SECTION_FIELD_TEXT)
        if "accessory" in block:
            self.element(
                block["accessory"], f"{ptr}/accessory", INTERACTIVE_ELEMENTS | {"image"}
            )
        self.boolean(block, "expand", ptr)

    def block_context(self, block: dict[str, Any], ptr: str) -> None:
        if not self.required(block, ["elements"], ptr):
            return
        elements = self.array(
            block["elements"], f"{ptr}/elements", max_items=MAX_CONTEXT_ELEMENTS, min_items=1
        )
        for i, value in enumerate(elements or []):
            eptr = f"{ptr}/elements/{i}"
            element = self.obj(value, eptr)
            if element is None:
                continue
            if element.get("type") == "image":
                self.image_element(element, eptr)
            else:
                self.text_object(element, eptr, max_len=None)

    def block_divider(self, block: dict[str, Any], ptr: str) -> None:
        return None

    def block_header(self, block: dict[str, Any], ptr: str) -> None:
        if self.required(block, ["text"], ptr):
            self.text_object(
                block["text"],
                f"{ptr}/text",
                max_len=MAX_HEADER_TEXT,
                types=frozenset({"plain_text"}),
            )

    def block_actions(self, block: dict[str, Any], ptr: str) -> None:
        if not self.required(block, ["elements"], ptr):
            return
        elements = self.array(
            block["elements"], f"{ptr}/elements", max_items=MAX_ACTIONS_ELEMENTS, min_items=1
        )
        for i, element in enumerate(elements or []):
            self.element(element, f"{ptr}/elements/{i}", INTERACTIVE_ELEMENTS)

    def block_image(self, block: dict[str, Any], ptr: str) -> None:
        self.required(block, ["alt_text"], ptr)
        if "alt_text" in block:
            self.string(block["alt_text"], f"{ptr}/alt_text", max_len=MAX_ALT_TEXT, min_len=1)
        if "image_url" not in block and "slack_file" not in block:
            self.err("must provide either image_url or slack_file", ptr)
        if "image_url" in block:
            self.string(block["image_url"], f"{ptr}/image_url", max_len=MAX_URL, min_len=1)
        if "title" in block:
            self.text_object(
                block["title"],
                f"{ptr}/title",
                max_len=MAX_IMAGE_TITLE,
                types=frozenset({"plain_text"}),
            )

    def block_input(self, block: dict[str, Any], ptr: str) -> None:
        plain = frozenset({"plain_text"})
        if not self.required(block, ["label", "element"], ptr):
            return
        self.text_object(block["label"], f"{ptr}/label", max_len=MAX_INPUT_LABEL, types=plain)
        if "hint" in block:
            self.text_object(block["hint"], f"{ptr}/hint", max_len=MAX_INPUT_HINT, types=plain)
        self.element(
            block["element"],
            f"{ptr}/element",
            (INTERACTIVE_ELEMENTS - {"button", "overflow", "workflow_button"})
            | INPUT_ONLY_ELEMENTS,
        )
        self.boolean(block, "dispatch_action", ptr)
        self.boolean(block, "optional", ptr)

    def block_markdown(self, block: dict[str, Any], ptr: str) -> None:
        if not self.required(block, ["text"], ptr):
            return
        text = self.string(block["text"], f"{ptr}/text", min_len=1)
        if text is not None:
            self.markdown_total += len(text)
            if self.markdown_total > MAX_MARKDOWN_TOTAL:
                self.err(
                    f"cumulative markdown block text must be less than {MAX_MARKDOWN_TOTAL + 1}"
                    " characters",
                    f"{ptr}/text",
                )

    def block_rich_text(self, block: dict[str, Any], ptr: str) -> None:
        if not self.required(block, ["elements"], ptr):
            return
        containers = self.array(block["elements"], f"{ptr}/elements", min_items=1)
        for i, value in enumerate(containers or []):
            self.rich_text_container(value, f"{ptr}/elements/{i}", RICH_TEXT_CONTAINERS)

    def rich_text_container(self, value: Any, ptr: str, allowed: frozenset[str]) -> None:
        container = self.obj(value, ptr)
        if container is None:
            return
        ctype = container.get("type")
        if ctype not in allowed:
            self.err(f"unsupported rich text element type: {ctype!r}", f"{ptr}/type")
            return
        if not self.required(container, ["elements"], ptr):
            return
        children = self.array(container["elements"], f"{ptr}/elements")
        if ctype == "rich_text_list":
            self.required(container, ["style"], ptr)
            if "style" in container:
                self.enum(container["style"], {"bullet", "ordered"}, f"{ptr}/style")
            for i, child in enumerate(children or []):
                self.rich_text_container(
                    child, f"{ptr}/elements/{i}", frozenset({"rich_text_section"})
                )
            return
        for i, child in enumerate(children or []):
            self.rich_text_inline(child, f"{ptr}/elements/{i}")

    def rich_text_inline(self, value: Any, ptr: str) -> None:
        inline = self.obj(value, ptr)
        if inline is None:
            return
        itype = inline.get("type")
        if itype not in RICH_TEXT_INLINE:
            self.err(f"unsupported rich text element type: {itype!r}", f"{ptr}/type")
            return
        needed = RICH_TEXT_INLINE[itype]
        if needed is not None and self.required(inline, [needed], ptr) and itype == "text":
            self.string(inline["text"], f"{ptr}/text", min_len=1)
        if itype == "broadcast" and "range" in inline:
            self.enum(inline["range"], {"here", "channel", "everyone"}, f"{ptr}/range")


def validate_blocks(blocks: Any, *, max_blocks: int = MAX_BLOCKS, ptr: str = "/blocks") -> list[str]:
    """Return Slack-style error messages for `blocks` (empty list when the blocks are valid)."""
    v = _Validator()
    _blocks(v, blocks, max_blocks, ptr)
    return v.errors


def _blocks(v: _Validator, blocks: Any, max_blocks: int, ptr: str) -> None:
    items = v.array(blocks, ptr, max_items=max_blocks)
    for i, block in enumerate(items or []):
        v.block(block, f"{ptr}/{i}")


MAX_VIEW_BLOCKS = 100
MAX_VIEW_TITLE = 24
MAX_PRIVATE_METADATA = 3000
MAX_CALLBACK_ID = 255
MAX_TEXT_INPUT = 3000
_VIEW_KEYS = {
    "modal": frozenset({"type", "title", "blocks", "close", "submit", "private_metadata", "callback_id",
                        "clear_on_close", "notify_on_close", "external_id", "submit_disabled"}),
    "home": frozenset({"type", "blocks", "private_metadata", "callback_id", "external_id"}),
}


def validate_view(view: Any, surface: str) -> list[str]:
    """Slack's checks on a view for `views.open` (surface "modal") or `views.publish` ("home"):
    at most 100 blocks, a plain_text title of at most 24 characters (modals), `private_metadata` at
    most 3000 characters, and a modal with an input block must have a submit button."""
    v = _Validator()
    if not isinstance(view, dict):
        v.err("must be an object", "/view")
        return v.errors
    if view.get("type") != surface:
        v.err(f"must be {surface!r} here", "/view/type")
        return v.errors
    v.keys(view, _VIEW_KEYS[surface], "/view")
    plain = frozenset({"plain_text"})
    if surface == "modal" and v.required(view, ["title"], "/view"):
        v.text_object(view["title"], "/view/title", max_len=MAX_VIEW_TITLE, types=plain)
    for button in ("submit", "close"):
        if button in view:
            v.text_object(view[button], f"/view/{button}", max_len=MAX_VIEW_TITLE, types=plain)
    if "private_metadata" in view:
        v.string(view["private_metadata"], "/view/private_metadata", max_len=MAX_PRIVATE_METADATA)
    if "callback_id" in view:
        v.string(view["callback_id"], "/view/callback_id", max_len=MAX_CALLBACK_ID)
    if v.required(view, ["blocks"], "/view"):
        _blocks(v, view["blocks"], MAX_VIEW_BLOCKS, "/view/blocks")
        blocks = view["blocks"] if isinstance(view["blocks"], list) else []
        inputs = [(i, b) for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("type") == "input"]
        if inputs and surface == "modal" and "submit" not in view:
            v.err("a modal with input blocks needs a submit button", "/view/submit")
        for i, block in inputs:
            element = block.get("element") if isinstance(block.get("element"), dict) else {}
            if element.get("type") == "plain_text_input":
                for bound in ("min_length", "max_length"):
                    value = element.get(bound)
                    if value is not None and not (isinstance(value, int) and 0 <= value <= MAX_TEXT_INPUT):
                        v.err(f"must be an integer from 0 to {MAX_TEXT_INPUT}", f"/view/blocks/{i}/element/{bound}")
    return v.errors
