"""Upsonic sessions as rows: the session without its runs, and one row per run.

Runs are rows of their own so that two tasks running different runs of one session both keep theirs, and
so that an upsert writes only what changed: a run equal to the stored one, or one this adapter has not
changed since it last read or wrote it, is left alone (a stale copy in a caller's session object never
overwrites a newer run another task saved). Upserts never delete runs; deleting the session does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from .. import InvalidArgument
from . import _upsonic_rows as rows
from ._upsonic_tables import Tables, labels_of, matches, segment


class SessionOfAnotherUser(InvalidArgument):
    """An upsert of a session id that is stored under another user_id (sessions never change owner)."""


class SessionRows:
    """The sessions table of one adapter (`Tables` does the I/O and the commits)."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        # run path -> the run as this adapter last read or wrote it, as JSON text: a copy no caller holds
        self._seen_runs: dict[str, str] = {}
        self._last_ns = 0

    def path(self, session_id: str) -> str:
        return self._tables.path("sessions", session_id, "session")

    async def put(self, row: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Write a session and its changed runs (inside a commit); the session as stored, all runs."""
        path = self.path(row["session_id"])
        stored = await self._tables.read(path)
        if stored is not None:
            owner = stored["row"].get("user_id")
            if owner is not None and owner != row.get("user_id"):
                raise SessionOfAnotherUser(f"session {row['session_id']!r} belongs to another user")
            row["created_at"] = stored["row"].get("created_at", row["created_at"])
        await self._tables.write(path, {"row": row}, {"kind": "session", **labels_of(row, rows.SESSION_LABELS)})
        for run_id, run in runs.items():
            run_path = self._tables.path("sessions", row["session_id"], "runs", run_id)
            kept = await self._tables.read(run_path)
            if kept is not None and (kept["row"] == run or self._seen_runs.get(run_path) == _text(run)):
                continue  # equal, or a copy this adapter has not changed: a newer run saved elsewhere stays
            added_ns = kept["added_ns"] if kept is not None else self._next_ns()
            labels = {"kind": "run", **labels_of({"session_id": row["session_id"]}, ("session_id",))}
            await self._tables.write(run_path, {"row": run, "run_id": run_id, "added_ns": added_ns}, labels)
            self._seen_runs[run_path] = _text(run)
        return (await self.with_runs([row]))[0]

    async def find(self, wanted: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The session rows (without runs) holding every field of `wanted`."""
        where = {"kind": "session", **labels_of(wanted, tuple(wanted))}
        found = await self._tables.find("sessions", where)
        return [b["row"] for b in found.values() if matches(b["row"], wanted)]

    async def with_runs(self, session_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The sessions with their runs, in the order the runs were first stored."""
        if not session_rows:
            return []
        only = session_rows[0]["session_id"]
        under = f"sessions/{segment(only)}/runs" if len(session_rows) == 1 else "sessions"
        found = await self._tables.find(under, {"kind": "run"})
        by_session: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
        for path, body in found.items():
            run = (body["added_ns"], body["run_id"], body["row"])
            by_session.setdefault(path.split("/runs/", 1)[0], []).append(run)
            self._seen_runs[path] = _text(body["row"])
        result: list[dict[str, Any]] = []
        for row in session_rows:
            runs = sorted(by_session.get(self.path(row["session_id"]).removesuffix("/session.json"), []))
            result.append({**row, "runs": {run_id: run for _, run_id, run in runs}})
        return result

    async def delete(self, session_ids: list[str]) -> int:
        """Delete sessions and their runs (inside a commit); how many sessions there were."""
        deleted = 0
        for session_id in dict.fromkeys(session_ids):
            for run_path in await self._tables.find(f"sessions/{segment(session_id)}/runs"):
                await self._tables.delete(run_path)
            deleted += await self._tables.delete(self.path(session_id))
        return deleted

    def _next_ns(self) -> int:
        """Insertion order of runs within this process, even when the clock does not move between them."""
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return self._last_ns


def _text(run: dict[str, Any]) -> str:
    return json.dumps(run, sort_keys=True)
