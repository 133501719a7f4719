"""Where a `MemoryOpResource` may read from, and reading it: a local file, a local directory (recursively)
or an ``http(s)://`` URL (through ``fsspec.open``), as the bytes of each file.

The policy is the one of OpenRath's local backend, from the same store options, so a store opened with
the local backend's options behaves the same on ours; nothing is readable by default:

* ``resource_import_roots``: local paths (a str or a list) under which files and directories may be read
  (after resolving symlinks, for every file of a directory too). Without it, every local path is
  ``unauthorized``. Each file is read from one open that follows no link at its end (``O_NOFOLLOW``) and
  must be the file checked (``st_dev``, ``st_ino``): a file swapped for a link or another file between
  the check and the read is ``unauthorized`` and the ingest lands nothing.
* ``resource_allowed_http_hosts``: host names an ``http(s)`` URL may name. A host that resolves to a
  loopback, private, link-local, multicast, reserved or unspecified address is refused unless
  ``resource_allow_private_hosts`` is true. Redirects are not followed (each URL is checked itself).
* ``resource_max_bytes``: the most one ingest may read (all files of a directory together), 10 MiB by
  default.

Other schemes are ``unsupported``; a missing path, or a URL answered 404, is ``not_found``; a failed
transfer or a source over the size limit is ``transport``; a transfer over the op's ``timeout_seconds``
(30 s by default) is ``timeout``. A URL's body is read to its end (however many pieces it arrives in),
counted against ``resource_max_bytes`` as it arrives and within ``timeout_seconds`` in all; a body over
either lands nothing.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from stat import S_ISREG
from typing import Any

from .errors import OpFailure, fail

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_TIMEOUT", "Fetched", "ResourcePolicy", "fetch", "resource_policy"]

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0  # seconds, as the local backend's urlopen
READ_CHUNK = 64 * 1024  # bytes asked of an http(s) stream per read
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX; elsewhere the st_dev/st_ino check alone


@dataclass(frozen=True)
class ResourcePolicy:
    """What a store's resource ingests may read (see the module docstring)."""

    local_roots: tuple[Path, ...] = ()
    allowed_http_hosts: frozenset[str] = frozenset()
    allow_private_hosts: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class Fetched:
    """A read source: its files (relative POSIX path -> bytes, sorted by path), its label (the resolved
    path or the URL), its original name, and whether it was a directory."""

    files: dict[str, bytes]
    label: str
    name: str
    is_dir: bool

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())


def resource_policy(options: Mapping[str, Any]) -> ResourcePolicy:
    """The policy the store options give (the local backend's option names)."""
    roots = tuple(Path(p).expanduser().resolve(strict=False) for p in _strings(options.get("resource_import_roots")))
    hosts = frozenset(h.lower() for h in _strings(options.get("resource_allowed_http_hosts")))
    raw = options.get("resource_max_bytes", DEFAULT_MAX_BYTES)
    try:
        max_bytes = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"options['resource_max_bytes'] must be an int, got {raw!r}") from None
    return ResourcePolicy(roots, hosts, bool(options.get("resource_allow_private_hosts", False)), max(1, max_bytes))


def _strings(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str | os.PathLike):
        return (os.fspath(raw),)
    return tuple(os.fspath(x) if isinstance(x, os.PathLike) else str(x) for x in raw)


def fetch(source: object, policy: ResourcePolicy, timeout: float | None = None) -> Fetched:
    """The files of `source` under `policy` (raises `OpFailure`: see the module docstring); a URL's
    transfer takes at most `timeout` seconds (`DEFAULT_TIMEOUT` if None), else ``timeout``."""
    if not isinstance(source, str) or not source.strip():
        raise fail("not_found", f"a resource source must be a non-empty path or URL, got {source!r}")
    parsed = urllib.parse.urlparse(source)
    scheme = parsed.scheme.lower()
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme = ""
    if scheme in ("http", "https"):
        return _fetch_url(source, parsed, policy, DEFAULT_TIMEOUT if timeout is None else float(timeout))
    if scheme == "file":
        return _fetch_local(Path(urllib.request.url2pathname(parsed.path)), policy)
    if scheme:
        raise fail("unsupported", f"resource source scheme {scheme!r} is not supported (a path, file:// or http(s)://)")
    return _fetch_local(Path(source), policy)


def _fetch_local(path: Path, policy: ResourcePolicy) -> Fetched:
    local = path.expanduser().resolve(strict=False)
    _check_inside(local, policy)
    checked = _regular_stat(local)
    if checked is not None:
        data = _read_file(local, checked, policy.max_bytes)
        return Fetched({local.name: data}, str(local), local.name, is_dir=False)
    if not local.is_dir():
        raise fail("not_found", f"resource source not found: {local}")
    files: dict[str, bytes] = {}
    budget = policy.max_bytes
    for rel, resolved, stat in _walk(local, policy):  # every file checked before any is read
        files[rel] = _read_file(resolved, stat, budget)
        budget -= len(files[rel])
    return Fetched(files, str(local), local.name, is_dir=True)


def _walk(local: Path, policy: ResourcePolicy) -> list[tuple[str, Path, os.stat_result]]:
    """``(relative POSIX path, resolved path, its stat as checked)`` of each file under `local`, sorted; a
    link out of the roots refuses the whole ingest; sockets, fifos and dangling links are skipped (nothing
    to ingest there)."""
    found: list[tuple[str, Path, os.stat_result]] = []
    for root, dirs, names in os.walk(local):
        dirs.sort()
        for name in sorted(names):
            resolved = Path(root, name).resolve(strict=False)
            _check_inside(resolved, policy)
            stat = _regular_stat(resolved)
            if stat is not None:
                found.append((Path(root, name).relative_to(local).as_posix(), resolved, stat))
    return sorted(found, key=lambda f: f[0])


def _regular_stat(path: Path) -> os.stat_result | None:
    """The stat of `path` (a resolved path) if it is a regular file, else None."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat if S_ISREG(stat.st_mode) else None


def _check_inside(local: Path, policy: ResourcePolicy) -> None:
    if not policy.local_roots:
        raise fail("unauthorized", "resource source not allowed: local paths require resource_import_roots")
    if not any(local == root or root in local.parents for root in policy.local_roots):
        raise fail("unauthorized", f"resource source not allowed: {local} is outside resource_import_roots")


def _read_file(path: Path, checked: os.stat_result, budget: int) -> bytes:
    """The bytes of the file the policy checked at `path` (resolved, so no link), read from one open of it
    that follows no link at its end and is that same file (``st_dev``, ``st_ino``): a file swapped for a
    link, or for another file, between the check and the read is ``unauthorized`` and never read."""
    changed = f"resource source not allowed: {path} changed between its check and its read"
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise fail("not_found", f"resource source not found: {path}") from None
    except PermissionError as err:
        raise fail("unauthorized", f"resource source not readable: {err}") from None
    except OSError as err:
        if err.errno == errno.ELOOP:  # a link now, where the check saw a file
            raise fail("unauthorized", changed) from None
        raise fail("transport", f"failed to read resource {path}: {err}") from None
    try:
        with os.fdopen(fd, "rb") as f:
            opened = os.fstat(f.fileno())
            if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino) or not S_ISREG(opened.st_mode):
                raise fail("unauthorized", changed)
            data = f.read(max(budget, 0) + 1)
    except OSError as err:
        raise fail("transport", f"failed to read resource {path}: {err}") from None
    if len(data) > budget:
        raise fail("transport", f"resource exceeds resource_max_bytes at {path}")
    return data


def _fetch_url(url: str, parsed: urllib.parse.ParseResult, policy: ResourcePolicy, timeout: float) -> Fetched:
    _check_url(parsed, policy)
    try:  # fsspec's http filesystem needs aiohttp; imported here so paths and files need neither
        import aiohttp
        import fsspec
    except ImportError as err:
        raise fail("unsupported", f"http(s) resources need fsspec's http filesystem (aiohttp): {err}") from None
    limit = aiohttp.ClientTimeout(total=timeout)
    try:
        one = fsspec.open(url, "rb", block_size=0, allow_redirects=False, timeout=limit)
        if isinstance(one, list):  # a glob in the URL: not one resource
            raise fail("unsupported", f"resource URL {url} names several files; ingest one at a time")
        with one as f:
            status = getattr(getattr(f, "r", None), "status", 200)
            if 300 <= int(status) < 400:
                raise fail("unauthorized", f"resource URL {url} redirects; redirects are not followed")
            data = _read_to_end(f, url, policy.max_bytes, time.monotonic() + timeout, timeout)
    except Exception as err:
        if isinstance(err, OpFailure):
            raise
        raise _url_failure(url, err, timeout) from None
    name = PurePosixPath(parsed.path).name or "resource"
    return Fetched({name: data}, url, name, is_dir=False)


def _read_to_end(f: Any, url: str, max_bytes: int, deadline: float, timeout: float) -> bytes:
    """The body of a streamed response, read to its end: a stream's ``read(n)`` returns what has arrived
    so far, so one call is only the first chunk. More than `max_bytes` is ``transport``; a body not read
    by `deadline` (``time.monotonic()``) is ``timeout`` (aiohttp's total time-out also ends a read that
    blocks)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise fail("timeout", f"fetching resource {url} took over {timeout:g} s")
        chunk = f.read(min(READ_CHUNK, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise fail("transport", f"resource exceeds resource_max_bytes ({max_bytes}): {url}")


def _url_failure(url: str, err: BaseException, timeout: float) -> OpFailure:
    """What a failed fetch of `url` is. fsspec reports every failure of its first look at a URL as
    `FileNotFoundError`, the real one as its cause: a 404 (fsspec's `FileNotFoundError` at the root of
    the chain) is ``not_found``, a time-out
    ``timeout``, anything else of the transfer ``transport``; another exception is raised as it is."""
    chain: list[BaseException] = []
    at: BaseException | None = err
    while at is not None and at not in chain:
        chain.append(at)
        at = at.__cause__ or at.__context__
    if any(isinstance(e, TimeoutError) for e in chain):
        return fail("timeout", f"fetching resource {url} took over {timeout:g} s")
    statuses = [getattr(e, "status", None) for e in chain if type(e).__module__.startswith("aiohttp")]
    if 404 in statuses or isinstance(chain[-1], FileNotFoundError):  # fsspec's own 404, or the server's
        return fail("not_found", f"resource source not found: {url}")
    if isinstance(err, OSError) or any(type(e).__module__.startswith("aiohttp") for e in chain):
        detail = chain[-1] if len(chain) > 1 else err
        return fail("transport", f"failed to fetch resource {url}: {type(detail).__name__}: {detail}")
    raise err


def _check_url(parsed: urllib.parse.ParseResult, policy: ResourcePolicy) -> None:
    host = (parsed.hostname or "").lower()
    if not host:
        raise fail("unauthorized", "resource source not allowed: an http(s) URL needs a host")
    if host not in policy.allowed_http_hosts:
        raise fail("unauthorized", f"resource source not allowed: host {host!r} is not in resource_allowed_http_hosts")
    try:
        port = parsed.port or (443 if parsed.scheme.lower() == "https" else 80)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError) as err:
        raise fail("transport", f"cannot resolve {host!r}: {err}") from None
    if policy.allow_private_hosts:
        return
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if (
            ip.is_loopback
            or ip.is_private
            or ip.is_link_local
            or ip.is_multicast
            or ip.is_reserved
            or ip.is_unspecified
        ):
            raise fail("unauthorized", f"resource source not allowed: {host!r} resolves to a private address ({ip})")
