"""Pure: the typed transcript: pydantic models of the messages ``flyte.ai.agents.Agent`` writes, and the
check `append`/`extend` make with them when a store is opened with ``validate_messages=True``.

The models follow the OpenAI chat shape the Agent writes (``system``, ``user``, ``assistant`` with
``tool_calls``, ``tool``), discriminated on ``role``. Every model *allows and keeps* keys it does not
declare (``extra="allow"``): providers add their own (``refusal``, ``reasoning_content``, a tool call's
``index``), and a transcript that dropped them would no longer be what the caller appended.

The store keeps plain dicts either way (the persisted transcript stays upstream's ``messages.json``): a
dict that passes is stored as given; a model instance is stored as its JSON dump, fields that are None
left out (`to_dict`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from ..errors import InvalidMessage
from .transcript import check_message

__all__ = [
    "AssistantMessage",
    "FunctionCall",
    "Message",
    "MessageModel",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]

#: the content of a message: text, or a list of content parts (``{"type": "text", "text": ...}``,
#: ``{"type": "image_url", ...}``), as the OpenAI API takes them
Content = str | list[dict[str, Any]]

ROLES = ("system", "user", "assistant", "tool")


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class FunctionCall(_Model):
    """The function a tool call invokes: its name and its arguments as the JSON text the model produced
    (kept as text: a model may emit invalid JSON, and the transcript records what it emitted)."""

    name: str = Field(min_length=1)
    arguments: str


class ToolCall(_Model):
    """One tool call of an assistant message: ``{"id", "type": "function", "function": {"name", "arguments"}}``."""

    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(_Model):
    """The system prompt: ``{"role": "system", "content": ...}``."""

    role: Literal["system"] = "system"
    content: Content


class UserMessage(_Model):
    """What the user (or the Agent's code mode, reporting a result) said: ``{"role": "user", "content": ...}``."""

    role: Literal["user"] = "user"
    content: Content


class AssistantMessage(_Model):
    """The model's reply: text, tool calls, or both; `content` may be None only when there are tool calls."""

    role: Literal["assistant"] = "assistant"
    content: Content | None = None
    tool_calls: list[ToolCall] | None = None

    @model_validator(mode="after")
    def _says_something(self) -> AssistantMessage:
        if self.content is None and not self.tool_calls:
            raise ValueError("an assistant message needs content or tool_calls")
        return self


class ToolMessage(_Model):
    """A tool's result, answering the tool call `tool_call_id`: ``{"role": "tool", "tool_call_id", "content"}``."""

    role: Literal["tool"] = "tool"
    tool_call_id: str = Field(min_length=1)
    content: Content
    name: str | None = None


#: a typed message instance (what `append` takes besides a dict)
MessageModel = SystemMessage | UserMessage | AssistantMessage | ToolMessage

#: any transcript message, told apart by its ``role`` (validate with ``pydantic.TypeAdapter(Message)``)
Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]

_ADAPTER: TypeAdapter[Any] = TypeAdapter(Message)


def to_dict(message: BaseModel) -> dict[str, Any]:
    """The plain dict a model instance is stored as (its JSON dump, None fields left out)."""
    return message.model_dump(mode="json", exclude_none=True)


def admit(message: Any, *, validate: bool) -> Any:
    """What `append` stores for `message`: a model instance becomes its dict; with `validate`, the
    message must also match a `Message` model. Raises `InvalidMessage` (storage rules, `_rules.transcript`,
    always apply)."""
    if isinstance(message, BaseModel):
        message = to_dict(message)
    if validate:
        _check_shape(message)
    check_message(message)
    return message


def admit_all(messages: list[Any], *, validate: bool) -> list[Any]:
    """`admit` for each message, all or none: the first that fails raises, naming its index."""
    admitted = []
    for index, message in enumerate(messages):
        try:
            admitted.append(admit(message, validate=validate))
        except InvalidMessage as exc:
            raise InvalidMessage(f"message {index}: {exc}") from exc
    return admitted


def _check_shape(message: Any) -> None:
    if not isinstance(message, dict):
        raise InvalidMessage(f"A transcript message must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise InvalidMessage(f"A transcript message needs a role among {', '.join(ROLES)}; got {role!r}")
    try:
        _ADAPTER.validate_python(message)
    except ValidationError as exc:
        raise InvalidMessage(f"Not a valid {role} message: {_reasons(exc)}") from None


def _reasons(exc: ValidationError) -> str:
    """Pydantic's errors as one line: ``tool_calls.0.function.arguments: Input should be a valid string``."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"][1:])  # the first part is the role tag
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "; ".join(parts)
