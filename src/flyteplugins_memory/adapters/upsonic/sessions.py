"""Upsonic sessions as rows: the session without its runs, and one row per run.

Runs are rows of their own so that two tasks running different runs of one session both keep theirs, and
so that an upsert writes only the runs that differ from the stored ones. A completed run is final: an
upsert carrying it in another status (a stale copy from before another task resumed and finished it)
leaves it, so a finished run is never offered for resumption again. Otherwise the last upsert of a run
wins. Upserts never delete runs; deleting the session does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ... import InvalidArgument
from . import rows
from .tables import Tables, labels_of, matches, segment


class SessionOfAnotherUser(InvalidArgument):
    """An upsert of a session id that is stored under another user_id (sessions never change owner)."""


class SessionRows:
    """The sessions table of one adapter (`Tables` does the I/O and the commits)."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        self._last_ns = 0

    def path(self, session_id: str) -> str:
        return self._tables.path("sessions", session_id, "session")

    def runs_under(self, session_id: str) -> str:
        return f"{self._tables.dirs['sessions']}/{segment(session_id)}/runs"

    async def put(self, row: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Write a session and its changed runs (inside a commit); the session as stored, all runs."""
        path = self.path(row["session_id"])
        stored = await self._tables.read(path)
        if stored is not None:
            if stored["row"].get("user_id") != row.get("user_id"):  # None is an owner too
                raise SessionOfAnotherUser(f"session {row['session_id']!r} belongs to another user")
            row["created_at"] = stored["row"].get("created_at", row["created_at"])
        await self._tables.write(path, {"row": row}, {"kind": "session", **labels_of(row, rows.SESSION_LABELS)})
        for run_id, run in runs.items():
            run_path = self._tables.path("sessions", row["session_id"], "runs", run_id)
            kept = await self._tables.read(run_path)
            if kept is not None and (kept["row"] == run or (_final(kept["row"]) and not _final(run))):
                continue  # unchanged, or a stale copy of a run another task finished
            added_ns = kept["added_ns"] if kept is not None else self._next_ns()
            labels = {"kind": "run", **labels_of({"session_id": row["session_id"]}, ("session_id",))}
            await self._tables.write(run_path, {"row": run, "run_id": run_id, "added_ns": added_ns}, labels)
        return (await self.with_runs([row]))[0]

    async def find(self, wanted: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The session rows (without runs) holding every field of `wanted`."""
        where = {"kind": "session", **labels_of(wanted, tuple(wanted))}
        found = await self._tables.find(self._tables.dirs["sessions"], where)
        return [b["row"] for b in found.values() if matches(b["row"], wanted)]

    async def with_runs(self, session_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The sessions with their runs, in the order the runs were first stored (only these sessions'
        runs are listed and fetched)."""
        store = await self._tables.store()
        listed = {
            row["session_id"]: await store.list_paths.aio(f"{self._tables.prefix}/{self.runs_under(row['session_id'])}")
            for row in session_rows
        }
        bodies = await self._tables.read_all([p for paths in listed.values() for p in paths])
        result: list[dict[str, Any]] = []
        for row in session_rows:
            found = [bodies[p] for p in listed[row["session_id"]] if p in bodies]
            ordered = sorted(found, key=lambda b: (b["added_ns"], b["run_id"]))
            result.append({**row, "runs": {b["run_id"]: b["row"] for b in ordered}})
        return result

    async def delete(self, session_ids: list[str]) -> int:
        """Delete sessions and their runs (inside a commit); how many sessions there were."""
        deleted = 0
        for session_id in dict.fromkeys(session_ids):
            for run_path in await self._tables.find(self.runs_under(session_id)):
                await self._tables.delete(run_path)
            deleted += await self._tables.delete(self.path(session_id))
        return deleted

    def _next_ns(self) -> int:
        """Insertion order of runs within this process, even when the clock does not move between them."""
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return self._last_ns


def _final(run: dict[str, Any]) -> bool:
    """Whether a run is completed (Upsonic resumes only paused, error and cancelled runs)."""
    output = run.get("output")  # Upsonic's RunData: {"output": AgentRunOutput's fields}
    status = output.get("status") if isinstance(output, dict) else run.get("status")
    return isinstance(status, str) and status.lower() == "completed"
