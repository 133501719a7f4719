"""The name-length rules themselves (pure; the store-level behaviour is in test_name_limits.py)."""

from __future__ import annotations

import pytest

from flyteplugins_memory import InvalidPath
from flyteplugins_memory._rules.limits import check_path_fits, stored_names


def test_stored_names_of_a_path():
    names = stored_names("a/b.md")
    assert names["file"] == "a/b.md" and names["sidecar"] == "meta/a%2Fb.md.json"
    directory, version = names["version snapshot"].rsplit("/", 1)
    assert directory == "versions/a%2Fb.md" and len(version) == 107  # <ts>_<sha256>_<12-char token>.txt


@pytest.mark.parametrize(
    ("uri", "path", "fits"),
    [
        ("memory://bucket/" + "p" * 5000, "p" * 250, True),  # memory:// has no key limit
        ("s3://" + "b" * 900 + "/store", "p" * 100, True),  # the bucket is not part of the key
        ("s3://bucket/" + "p" * 900, "p" * 100, False),
        ("somefs://bucket/" + "p" * 900, "p" * 100, False),  # unknown: the whole path counts
        ("/" + "p/" * 2000, "p", False),  # a local path stays under 4,096 bytes, temp files included
    ],
)
def test_key_limits_by_backend(uri, path, fits):
    if fits:
        check_path_fits(path, uri)
    else:
        with pytest.raises(InvalidPath):
            check_path_fits(path, uri)
