"""The persisted read-only prefixes as `MemoryStore`'s API: reading them, changing them (trusted, audited,
committed at once) and setting them when a store is created. The rules themselves are in `_rules.read_only`."""

from __future__ import annotations

from collections.abc import Iterable

from ..._base.syncify import syncify
from ..._handle.special_commits import Settings
from ..._rules.codecs import utc_timestamp
from ..._rules.read_only import audit_event, canonical, persisted, refuse_untrusted, with_setting
from ..._rules.state import State
from ..._rules.writes import ChangeOptions
from ..core import StoreCore

__all__ = ["ReadOnlySettingsAPI", "creation_settings"]

#: Who sets the prefixes a store is created with (``create`` takes no actor).
CREATOR = "agent"


def creation_settings(prefixes: Iterable[str]) -> Settings | None:
    """What a ``create`` with `prefixes` commits: the persisted setting (None: none). No audit event: the
    trail stays as upstream's create leaves it; the create commit itself is the record."""
    wanted = canonical(prefixes)
    return Settings(with_setting({}, wanted)) if wanted else None


class ReadOnlySettingsAPI(StoreCore):
    """The persisted read-only prefixes: reading and (trusted) changing them."""

    @syncify
    async def persisted_read_only_prefixes(self) -> tuple[str, ...]:
        """The read-only prefixes persisted with the store, sorted, as of this handle's state (loaded first
        if need be; `refresh`, `save` and a new open pick up changes other handles committed). Every handle
        enforces them, together with its own ``read_only_prefixes`` (upstream's per-handle setting)."""
        view = await self._checkout.ready(self)
        return persisted(view.base.ext)

    @syncify
    async def set_read_only_prefixes(
        self, prefixes: Iterable[str], *, actor: str | None = None, reason: str | None = None
    ) -> tuple[str, ...]:
        """Replace the store's persisted read-only prefixes with `prefixes` (``()`` clears them) and commit
        at once, together with this handle's unsaved changes (checked against the prefixes in force before
        this call). Needs a handle opened with ``trusted=True`` (`NotTrusted` otherwise). Audited (op
        ``set_read_only_prefixes``, with the previous and new prefixes) and recorded in `log` as a
        ``"settings"`` commit, also by a handle opened with ``audit=False`` (which is about file
        writes). A compare-and-swap: if another handle changed them since this one loaded,
        `ConcurrencyError` (``refresh()`` and decide again). Returns the prefixes now persisted."""
        refuse_untrusted(self.trusted)
        wanted = canonical(prefixes)
        options = ChangeOptions(actor or CREATOR, reason or "", None, False, True)  # checks actor and reason

        def plan(base: State) -> Settings:
            event = audit_event(persisted(base.ext), wanted, options.actor, options.reason, utc_timestamp())
            return Settings(with_setting({}, wanted), [event])

        await self._checkout.change_settings(self, plan, actor=actor, reason=reason)
        return wanted
