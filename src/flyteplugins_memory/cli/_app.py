"""The ``memory`` command group (``flyte-memory`` and ``flyte memory``), its shared options and its one
place where failures become a single ``error: ...`` line on stderr and an exit code.

Exit codes: 0 success; 1 the command could not be done (no such store or file, corrupt store, storage
failure, conflict, declined confirmation, an archive `import` refuses); 2 the command line itself is wrong
(a usage error, an invalid key or path, a reserved or read-only path, an out-of-range option, a namespace
that cannot be resolved, an export over an existing file without --force).
Verb modules register on `memory` with ``@memory.command()``; a new verb is one module imported by the
package's ``__init__``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import rich_click as click
from click.exceptions import Exit

from ._notices import credentials_hint, show_retries
from ._render import printable
from ._target import Target

F = TypeVar("F", bound=Callable[..., Any])
#: who a command that changes a store records, unless ``--actor`` says
DEFAULT_ACTOR = "flyte-memory"
#: flyte's ``--output-format`` values that mean machine-readable JSON
JSON_FORMATS = ("json", "json-raw")


def expected() -> tuple[type[BaseException], ...]:
    """Failures mapped to one line; anything else is a bug and keeps its traceback. (The library's errors
    are imported here, once a command failed, so that ``--help`` and ``--version`` never load them.)"""
    from flyteplugins_memory import MemoryStoreError

    return (click.UsageError, click.Abort, MemoryStoreError, OSError)


def _typed_wrong(exc: BaseException) -> bool:
    """Whether `exc` was caused by what was typed: exit code 2, as click's usage errors."""
    if isinstance(exc, click.UsageError):
        return True
    from flyteplugins_memory import (
        AccessDenied,
        ArchiveExists,
        ContextError,
        InvalidArgument,
        InvalidKey,
        InvalidPath,
        UnsafeArchive,
    )

    # a refused archive is bad input, but not of the command line: the archive named is wrong
    bad_input = (InvalidKey, InvalidPath, InvalidArgument, AccessDenied, ContextError, ArchiveExists)
    return isinstance(exc, bad_input) and not isinstance(exc, UnsafeArchive)


def describe(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code for an expected failure."""
    if isinstance(exc, click.Abort):
        return "aborted, nothing changed", 1
    text = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
    if hint := credentials_hint(exc):
        text = f"{text} ({hint})"
    # messages quote stored names and paths: their control characters are shown, never run
    return printable(" ".join(text.split())) or type(exc).__name__, 2 if _typed_wrong(exc) else 1


class MemoryGroup(click.RichGroup):
    """A rich-click group whose subcommands fail with one ``error: ...`` line, never a traceback or a
    usage panel (parsing a subcommand's arguments happens inside `invoke`, so usage errors land here)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exit:
            raise  # --help, --version: a normal end (checked first, so that it loads nothing more)
        except Exception as exc:
            if not isinstance(exc, expected()):
                raise
            message, code = describe(exc)
            click.echo(f"error: {message}", err=True)
            ctx.exit(code)


#: help rendered as flyte's own CLI renders it: Markdown, so `code` shows as code under either name
HELP_CONFIG = click.RichHelpConfiguration(use_markdown=True)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from flyteplugins_memory import __version__  # the version module only, not the library

    click.echo(f"flyteplugins-memory {__version__}")
    ctx.exit()


@click.group(cls=MemoryGroup, name="memory")
@click.rich_config(help_config=HELP_CONFIG)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and exit.",
)
def memory() -> None:
    """Look inside flyteplugins-memory stores: files, transcript, commits, audit trail; clean them up.

    Name a store with `--key KEY` (plus `--org/--project/--domain/--root`, else the Flyte config, else the
    local defaults of a local `flyte.run`) or with `--uri URI`. Reading commands never create a store;
    `--json` prints machine-readable JSON only.
    """
    show_retries()


def actor_options(func: F) -> F:
    """``--actor`` and ``--reason``: who changes the store and why (recorded in the commit and audit trail)."""
    func = click.option("--reason", default="", help="Why (recorded in the commit and audit trail).")(func)
    return click.option("--actor", default=DEFAULT_ACTOR, show_default=True, help="Who (recorded).")(func)


def yes_option(func: F) -> F:
    """``--yes``/``-y``: do not ask before a change that cannot be undone."""
    return click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")(func)


def json_option(func: F) -> F:
    """``--json``: one JSON document on stdout, nothing else. Under ``flyte memory``, flyte's global
    ``--output-format json`` (``-of json``, or ``json-raw``) asks for the same."""

    @functools.wraps(func)
    def wrapper(*args: Any, json_output: bool, **kwargs: Any) -> Any:
        return func(*args, json_output=json_output or _flyte_wants_json(), **kwargs)

    option = click.option("--json", "json_output", is_flag=True, help="Print JSON only (for scripts).")
    return option(wrapper)  # type: ignore[return-value]


def _flyte_wants_json() -> bool:
    """Whether flyte's CLI, when it runs this group, was given a JSON output format: its root command
    keeps the global options on its context object (`flyte.cli._common.CLIConfig.output_format`)."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root().obj if ctx is not None else None
    return str(getattr(root, "output_format", "") or "").lower() in JSON_FORMATS


_NAMESPACE_OPTIONS = (
    click.option("--org", help="Organization (default: Flyte config, else `local`)."),
    click.option("--project", help="Project (default: Flyte config, else `default`)."),
    click.option("--domain", help="Domain (default: Flyte config, else `development`)."),
    click.option("--root", help="Storage root or raw-data path, e.g. `s3://bucket` (default: the local one)."),
)
_STORE_OPTIONS = (
    click.option("--key", help="The store's key."),
    *_NAMESPACE_OPTIONS,
    click.option("--uri", help="The store's exact location, instead of --key and friends."),
)


def store_options(func: F) -> F:
    """The store-naming options, handed to `func` as one `Target` (keyword ``target``)."""
    return _collected(func, _STORE_OPTIONS, ("key", "org", "project", "domain", "root", "uri"))


def namespace_options(func: F) -> F:
    """``--org/--project/--domain/--root``, handed to `func` as one `Target` (keyword ``target``)."""
    return _collected(func, _NAMESPACE_OPTIONS, ("org", "project", "domain", "root"))


def _collected(func: F, options: tuple[Callable[[Any], Any], ...], names: tuple[str, ...]) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        target = Target(**{name: kwargs.pop(name) for name in names})
        return func(*args, target=target, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]
