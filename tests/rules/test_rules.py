"""Pure rules: path normalization, write policy, object classification, storage-root math, codecs."""

from __future__ import annotations

import json

import pytest
from flyte.models import PathRewrite

from flyteplugins_memory import CorruptStore, InvalidKey, InvalidPath, ReadOnlyPath, ReservedPath
from flyteplugins_memory._rules.codecs import decode_audit_lines, decode_messages, decode_meta
from flyteplugins_memory._rules.layout import Kind, classify, sidecar_name, version_name
from flyteplugins_memory._rules.location import storage_root, store_path
from flyteplugins_memory._rules.paths import check_writable, normalize_path, validate_segment


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("a/b.txt", "a/b.txt"), ("a//b", "a/b"), ("./a/./b/", "a/b"), ("a b/ü.md", "a b/ü.md"), ("x\\y", "x\\y")],
)
def test_normalize_path_canonicalizes_like_upstream(raw, expected):
    assert normalize_path(raw) == expected


@pytest.mark.parametrize("raw", ["", ".", "/", "/abs", "..", "a/../b", "a/..", "nul\x00", "bell\x07", 3])
def test_normalize_path_refuses(raw):
    with pytest.raises(InvalidPath):
        normalize_path(raw)


def test_write_policy():
    check_writable("notes/a.md", ("memory/",))
    check_writable("audit.txt", ())  # only the directory is reserved
    for reserved in ("messages.json", "meta", "meta/x.json", "audit/log.jsonl", "versions/a/b"):
        with pytest.raises(ReservedPath):
            check_writable(reserved, ())
    with pytest.raises(ReadOnlyPath):
        check_writable("memory/core.md", ("memory/",))


@pytest.mark.parametrize("value", ["k", "agent-1", "a.b", "UPPER_9"])
def test_valid_segments(value):
    assert validate_segment(value) == value


@pytest.mark.parametrize("value", ["", ".", "..", "a/b", "a\\b", "\x00", "a\nb", None])
def test_invalid_segments(value):
    with pytest.raises(InvalidKey):
        validate_segment(value)


def test_classify_knows_every_kind():
    assert classify("messages.json").kind is Kind.MESSAGES
    assert classify("audit/log.jsonl").kind is Kind.AUDIT_LOG
    assert classify(sidecar_name("a/b.md")).path == "a/b.md"
    assert classify(version_name("a/b.md", "2026-01-01T00:00:00+00:00", "ab")).path == "a/b.md"
    assert classify("notes/x.md").kind is Kind.FILE
    assert classify("meta/sub/x.json").kind is Kind.OTHER_RESERVED
    assert sidecar_name("a/b c.md") == "meta/a%2Fb%20c.md.json"


@pytest.mark.parametrize(
    "name", ["../x", "a/../../x", "/abs", "a//b", "./a", "meta/..%2Fx.json", "versions/%2Fetc%2Fpasswd/1.txt", "n\x00"]
)
def test_classify_refuses_hostile_names(name):
    from flyteplugins_memory import UnsafeStoreContent

    with pytest.raises(UnsafeStoreContent):
        classify(name)


@pytest.mark.parametrize(
    ("raw", "rewrite", "expected"),
    [
        ("s3://bucket/w6/org/p/d/rd/abc", None, "s3://bucket"),
        ("gs://bucket/x/", None, "gs://bucket"),
        ("/data/runs/rd/run-7", None, "/data/runs"),
        ("/tmp/flyte/raw_data/action-1", None, "/tmp/flyte/raw_data"),
        ("/tmp/plain", None, "/tmp/plain"),
        ("/mnt/bucket/rd/x", PathRewrite(old_prefix="s3://bucket", new_prefix="/mnt/bucket"), "s3://bucket"),
        ("/elsewhere/a", PathRewrite(old_prefix="s3://bucket", new_prefix="/mnt/bucket"), "/elsewhere/a"),
    ],
)
def test_storage_root_matches_upstream(raw, rewrite, expected):
    from flyte.ai.agents.memory import _memory_storage_root

    assert storage_root(raw, rewrite) == expected == _memory_storage_root(raw, path_rewrite=rewrite)


def test_store_path_validates_every_segment():
    assert store_path("s3://b", "o", "p", "d", "k") == "s3://b/agents/memory-store/v0/o/p/d/k"
    with pytest.raises(InvalidKey):
        store_path("s3://b", "o/x", "p", "d", "k")


def test_meta_codec_is_strict():
    good = {"path": "a", "sha256": "0" * 64, "updated_at": "t", "updated_by": "u", "reason": "", "bytes": 1}
    assert decode_meta(json.dumps(good).encode(), expected_path="a").bytes == 1
    digests = ({**good, "sha256": "s"}, {**good, "sha256": "A" * 64}, {**good, "sha256": "<b>" * 21 + "0"})
    for bad in (
        {**good, "bytes": "1"},
        {**good, "bytes": -1},
        {**good, "path": "b"},
        {"path": "a"},
        *digests,
    ):
        with pytest.raises(CorruptStore):
            decode_meta(json.dumps(bad).encode(), expected_path="a")


def test_messages_codec_is_strict():
    assert decode_messages(b'[{"role": "user"}]') == [{"role": "user"}]
    for bad in (b"", b"{}", b"[1]", b'"x"', b"[{]"):
        with pytest.raises(CorruptStore):
            decode_messages(bad)


def test_audit_lines_skip_torn_lines():
    assert decode_audit_lines(b'{"a": 1}\n[1]\n{"b": 2}\n{"tor') == [{"a": 1}, {"b": 2}]
