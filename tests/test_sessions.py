"""A process that used a store on S3 or GCS exits without "Unclosed client session": the HTTP sessions of
the filesystems bound to the package's loop are closed before that loop stops, whatever order the
modules registered their exit handlers in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import DOMAIN, ORG, PROJECT

CHILD = """
import json, sys
import flyte, flyte.storage
from flyte._context import internal_ctx
from flyte.models import RawDataPath
config = json.loads(sys.argv[1])
storage = None
if config["endpoint"]:
    storage = flyte.storage.S3(endpoint=config["endpoint"], access_key_id="testing",
                               secret_access_key="testing", region="us-east-1")
flyte.init(org=config["org"], project=config["project"], domain=config["domain"], storage=storage)
internal_ctx().new_raw_data_path(RawDataPath(path=config["raw"])).__enter__()
from flyteplugins_memory import MemoryStore
store = MemoryStore.create(key=config["key"])
store.write_text("notes/a.md", "from the child")
store.save()
assert MemoryStore.get_or_create(key=config["key"]).read_text("notes/a.md") == "from the child"
print("done")
"""


@pytest.fixture(params=["s3_backend", "gcs_backend"])
def http_backend(request):
    endpoint = request.getfixturevalue("moto_endpoint") if request.param == "s3_backend" else None
    return request.getfixturevalue(request.param), endpoint


def test_a_process_that_used_a_store_exits_with_its_sessions_closed(http_backend, key):
    backend, endpoint = http_backend
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key}
    config |= {"org": ORG, "project": PROJECT, "domain": DOMAIN}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(config)], check=False, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-3000:]
    assert "Unclosed" not in done.stderr, done.stderr[-3000:]  # client session, or connector
    assert backend.upstream_view(key)["notes/a.md"] == b"from the child"
