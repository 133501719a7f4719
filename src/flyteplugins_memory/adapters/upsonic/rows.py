"""Upsonic's objects as stored rows and back (the codec half of the adapter).

Rows are plain JSON: a session as ``AgentSession.to_dict(serialize_flag=True)`` (Upsonic's own
serialisation, tasks cloudpickled as it does) minus its runs, which are rows of their own; a user memory,
cultural knowledge and knowledge row as their fields, timestamps as whole epoch seconds. Reading them back
uses Upsonic's own ``from_dict`` when Upsonic is importable; without it (tests of the contract on a machine
where Upsonic cannot be installed beside flyte) ``deserialize=True`` returns the stored dicts.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ... import InvalidArgument
from .tables import epoch_seconds

SESSION_LABELS = ("session_id", "user_id", "agent_id", "team_id", "workflow_id", "session_type")
USER_LABELS = ("user_id", "agent_id", "team_id")
CULTURE_LABELS = ("id", "name", "agent_id", "team_id")
KNOWLEDGE_LABELS = ("id", "knowledge_base_id")
USAGE_LABELS = (
    "entry_id",
    "chat_usage_id",
    "agent_usage_id",
    "task_usage_id",
    "team_usage_id",
    "workflow_usage_id",
    "system_usage_id",
    "run_id",
    "user_id",
    "kind",
)


def _default(value: Any) -> Any:
    """What `json` cannot encode, as Upsonic's JSON storage stores it (pydantic and dataclasses as their
    fields, enums as values, times as ISO text, anything else as its text)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def plain(value: Any) -> Any:
    """`value` as plain JSON data (a copy: later changes to the caller's object never reach the row)."""
    return json.loads(json.dumps(value, default=_default))


def fields_of(obj: Any, what: str) -> dict[str, Any]:
    """A mapping as it is, else the object's ``to_dict()``, else its dataclass fields."""
    if isinstance(obj, Mapping):
        return dict(obj)  # pyright: ignore[reportUnknownArgumentType]
    to_dict: Any = getattr(obj, "to_dict", None)
    if callable(to_dict):
        try:
            data: Any = to_dict(serialize_flag=True)  # sessions: cloudpickle the task, as Upsonic's stores do
        except TypeError:
            data = to_dict()
        return dict(data)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    raise InvalidArgument(f"a {what} is an Upsonic object, a dataclass or a mapping, got {type(obj).__name__}")


def required_id(fields: Mapping[str, Any], name: str, what: str) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"a {what} must have {name} set (a non-empty string), got {value!r}")
    return value


def session_type_of(value: Any) -> str:
    """``"agent"``, ``"team"`` or ``"workflow"`` from an enum, its ``to_dict()`` form or text."""
    if isinstance(value, Mapping):
        value = value.get("session_type")  # pyright: ignore[reportUnknownMemberType]
    value = getattr(value, "value", value)
    return value if isinstance(value, str) and value else "agent"


def session_row(session: Any, now: int) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The session's row (without runs) and its runs by run id."""
    fields = fields_of(session, "session")
    required_id(fields, "session_id", "session")
    runs = fields.pop("runs", None) or {}
    if not isinstance(runs, Mapping):
        raise InvalidArgument(f"a session's runs are a mapping of run id to run, got {type(runs).__name__}")
    row = plain(fields)
    for name in ("user_id", "agent_id", "team_id", "workflow_id"):
        if row.get(name) is not None and not isinstance(row[name], str):
            raise InvalidArgument(f"a session's {name} is a string or None, got {row[name]!r}")
    row["session_type"] = session_type_of(fields.get("session_type"))
    row["created_at"] = _or_now(epoch_seconds(row.get("created_at"), "created_at"), now)
    row["updated_at"] = now
    run_rows: dict[str, dict[str, Any]] = {}
    for run_id, run in runs.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(run_id, str) or not run_id:
            raise InvalidArgument(f"run ids are non-empty strings, got {run_id!r}")
        run_rows[run_id] = plain(fields_of(run, "run"))
    return row, run_rows


def _framework() -> Any | None:
    try:
        import upsonic.storage.schemas as schemas  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    return schemas


def session_out(row: dict[str, Any], deserialize: bool, session_type: Any = None) -> Any:
    if not deserialize or _framework() is None:
        return row
    from upsonic.storage.utils import deserialize_session  # pyright: ignore[reportMissingImports]

    return deserialize_session(row, session_type)


def user_memory_row(memory: Any, now: int) -> dict[str, Any]:
    fields = fields_of(memory, "user memory")
    required_id(fields, "user_id", "user memory")
    content = fields.get("user_memory")
    if not isinstance(content, Mapping):
        raise InvalidArgument(f"user_memory is a dict, got {type(content).__name__}")
    for name in ("agent_id", "team_id"):
        if fields.get(name) is not None and not isinstance(fields[name], str):
            raise InvalidArgument(f"a user memory's {name} is a string or None, got {fields[name]!r}")
    return {
        "user_id": fields["user_id"],
        "user_memory": plain(content),
        "agent_id": fields.get("agent_id"),
        "team_id": fields.get("team_id"),
        "created_at": _or_now(epoch_seconds(fields.get("created_at"), "created_at"), now),
        "updated_at": now,
    }


def user_memory_out(row: dict[str, Any], deserialize: bool) -> Any:
    schemas = _framework()
    return schemas.UserMemory.from_dict(row) if deserialize and schemas is not None else row


def culture_row(knowledge: Any, now: int) -> dict[str, Any]:
    """Cultural knowledge's row; one without an id is given one (on the caller's object too, as Upsonic's
    stores do)."""
    if getattr(knowledge, "id", "") is None:
        knowledge.id = str(uuid.uuid4())
    fields = fields_of(knowledge, "cultural knowledge")
    if fields.get("id") is None:
        fields["id"] = str(uuid.uuid4())
    required_id(fields, "id", "cultural knowledge")
    row = plain(fields)
    row["created_at"] = _or_now(epoch_seconds(row.get("created_at"), "created_at"), now)
    row["updated_at"] = _or_now(epoch_seconds(row.get("updated_at"), "updated_at"), now)
    return row


def culture_out(row: dict[str, Any], deserialize: bool) -> Any:
    if not deserialize or _framework() is None:
        return row
    from upsonic.culture.cultural_knowledge import CulturalKnowledge  # pyright: ignore[reportMissingImports]

    return CulturalKnowledge.from_dict(row)


def knowledge_row(row_in: Any, now: int) -> dict[str, Any]:
    fields = fields_of(row_in, "knowledge row")
    required_id(fields, "id", "knowledge row")
    row = plain(fields)
    row["created_at"] = _or_now(epoch_seconds(row.get("created_at"), "created_at"), now)
    row["updated_at"] = now
    return row


def knowledge_out(row: dict[str, Any]) -> Any:
    schemas = _framework()
    return schemas.KnowledgeRow.from_dict(row) if schemas is not None else row


def now_seconds() -> int:
    return int(time.time())


def _or_now(value: int | None, now: int) -> int:
    return now if value is None else value
