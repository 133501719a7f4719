"""Binary content: `MemoryStore.write_bytes`, `read_bytes` and `read_version_bytes`.

Bytes take the same road as text (one gate for paths, sidecars with the sha256 of the bytes, audit
events, ``expected_sha``, version snapshots, merges under concurrent saves); only the encoding step is
skipped, so upstream's readers find the exact bytes at the file's path. Nothing in the journal marks a
file as binary: a file is text when its bytes are UTF-8, so ``read_bytes`` of a text file returns its
UTF-8 bytes and ``read_text`` of binary content raises `NotText` rather than returning garbage.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from ..._base.syncify import syncify
from ..._journal import gc as _gc
from ..._journal import versions as _versions
from ..._journal.history import refuse_expired_snapshot
from ..._rules.admission import Access
from ..._rules.codecs import MemoryMeta
from ..._rules.metadata import Scalar
from ..._rules.record_codec import check_not_segment
from ..._rules.ttl import check_ttl, expiry_ext
from ..._rules.writes import ChangeOptions, binary_content
from ...errors import InvalidArgument
from ..core import StoreCore


class BinaryAPI(StoreCore):
    """Binary content: `write_bytes`, `read_bytes`, `read_version_bytes`."""

    @syncify
    async def write_bytes(
        self,
        rel_path: str,
        data: bytes,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
        ttl: timedelta | None = None,
    ) -> MemoryMeta:
        """Write binary `data` (an image, a tool's output) to `rel_path`, byte for byte, like `write_text`:
        same path rules, a sidecar with the sha256 of the bytes, an audit event, a version snapshot with
        ``keep_versions``, the same `expected_sha`, `metadata` and `ttl` rules. ``bytearray`` and
        ``memoryview`` are copied at the call; anything else (a str included) raises `InvalidContent`."""
        rel = self._admission.admit(rel_path, Access.WRITE)
        check_not_segment(rel)
        content = binary_content(data)
        expiry = expiry_ext(check_ttl(ttl), _gc.clock())
        options: ChangeOptions = self._change_options(actor, reason, expected_sha, metadata)
        return await self._checkout.write(self, rel, content, options, expiry)

    @syncify
    async def read_bytes(self, rel_path: str, default: bytes | None = None) -> bytes | None:
        """Contents of `rel_path` as bytes, exactly as stored (a text file's UTF-8 bytes), fetched on first
        read and checked against their sha256; `default` if there is no such file."""
        if default is not None and not isinstance(default, bytes):
            raise InvalidArgument(f"default must be bytes or None, got {type(default).__name__}")
        rel = self._admission.admit(rel_path, Access.READ)
        data = await self._checkout.read(self, rel)
        return default if data is None else data

    @syncify
    async def read_version_bytes(self, version_file: str, version_id: str | None = None) -> bytes:
        """Bytes of one version snapshot (named as by `list_versions`), exactly as written: a snapshot of
        binary content holds its bytes under upstream's ``versions/<path>/<ts>_<sha>.txt`` name.
        ``read_version_bytes(path, version_id)``: bytes of version `version_id` of `path` (see `history`)."""
        if version_id is not None:
            return await self._version_bytes(version_file, version_id)
        await refuse_expired_snapshot((await self._checkout.ready(self)).base, version_file)
        remote, pending = self._checkout.remote_if_known(), self._checkout.working_copy.versions
        return await _versions.read_version_bytes(remote, pending, version_file)
