"""The store's retention policy as `MemoryStore`'s API: reading it and changing it (audited, committed at
once, a compare-and-swap). The rules are in `_rules.retention_policy`; gc applies them (`_journal.gc`)."""

from __future__ import annotations

from datetime import timedelta

from ..._base.syncify import syncify
from ..._handle.special_commits import Settings
from ..._rules.codecs import utc_timestamp
from ..._rules.retention_policy import SETTING, RetentionPolicy, audit_event, checked_policy, persisted_policy
from ..._rules.state import State
from ..._rules.writes import ChangeOptions
from ..core import StoreCore

__all__ = ["RetentionAPI"]


class RetentionAPI(StoreCore):
    """The retention policy of ``versions/`` snapshots and the journal."""

    @property
    def retention(self) -> RetentionPolicy:
        """The store's retention policy (`get_retention`, synchronously)."""
        return self.get_retention()

    @syncify
    async def get_retention(self) -> RetentionPolicy:
        """The retention policy persisted with the store, as of this handle's state (loaded first if need
        be; `refresh`, `save` and a new open pick up changes other handles committed)."""
        view = await self._checkout.ready(self)
        return persisted_policy(view.base.ext)

    @syncify
    async def set_retention(
        self,
        keep_last: int | None = None,
        max_age: timedelta | None = None,
        *,
        actor: str = "agent",
        reason: str = "",
    ) -> RetentionPolicy:
        """Set the store's retention policy, for every handle: ``gc()`` keeps the newest `keep_last`
        versions of each path (an int >= 1) and/or those younger than `max_age` (a positive timedelta),
        in ``versions/`` and in the journal; both None (the default) keeps every version snapshot. Never
        the current content of a live path, nor what a state inside the gc window needs.

        Commits at once, together with this handle's unsaved changes: audited (op ``set_retention``, with
        the previous and new policy) and recorded in `log` as a ``"settings"`` commit. A compare-and-swap:
        if another handle changed the policy since this one loaded, `ConcurrencyError` (``refresh()`` and
        decide again). Bad input raises `InvalidRetention` before anything changes. Returns the policy."""
        wanted = checked_policy(keep_last, max_age)
        options = ChangeOptions(actor, reason, None, False, True)  # checks actor and reason

        def plan(base: State) -> Settings:
            event = audit_event(persisted_policy(base.ext), wanted, options.actor, options.reason, utc_timestamp())
            return Settings({SETTING: wanted.as_ext()}, [event])

        await self._checkout.change_settings(self, plan, actor=actor, reason=reason)
        return wanted
