"""Sessions, both kinds. A process that used a store on S3 or GCS exits without "Unclosed client session":
the HTTP sessions of the filesystems bound to the package's loop are closed before that loop stops,
whatever order the modules registered their exit handlers in. And a store's conversations
(``store.session(name)``): their ``messages`` is a list, as the store's transcript is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from backends import DOMAIN, ORG, PROJECT

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


# -- store.session(name): .messages is a list, as store.messages is (issue 23, defect 11) ----------------


def test_session_messages_is_a_list_like_the_transcript(durable_backend, key):
    from flyteplugins_memory import MemoryStore
    from flyteplugins_memory._api.conversations import SessionMessages

    store = MemoryStore.create(key=key)
    chat = store.session("support")
    assert chat.messages == [] and isinstance(chat.messages, list) and isinstance(store.messages, list)
    chat.append({"role": "user", "content": "hi"})
    chat.extend([{"role": "assistant", "content": "hello"}])
    assert chat.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert isinstance(chat.messages, SessionMessages) and len(chat.messages) == 2
    assert [m["content"] for m in chat.messages] == ["hi", "hello"] and chat.messages[-1]["role"] == "assistant"
    store.save()
    copy = chat.messages
    copy[0]["content"] = "changed here only"
    assert chat.messages[0]["content"] == "hi"  # fresh copies: the list is a view, not the log
    fresh = MemoryStore.open(key=key).session("support")
    assert fresh.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert fresh.read(since=1) == [{"role": "assistant", "content": "hello"}] and fresh.count() == 2
    # stored in the session's record log, in the journal and upstream's layout, not in the transcript
    assert b"hello" not in durable_backend.objects(key).get("messages.json", b"")
    assert any(b'"hello"' in data for data in durable_backend.stored(key).values())


def test_calling_session_messages_still_works_for_a_release_with_a_deprecation_warning(durable_backend, key):
    from flyteplugins_memory import InvalidArgument, MemoryStore

    store = MemoryStore.create(key=key)
    chat = store.session("support")
    chat.extend([{"role": "user", "content": str(i)} for i in range(4)])
    store.save()
    listed = chat.messages
    with pytest.warns(DeprecationWarning, match="session.messages is a list now"):
        called = listed()
    assert called is listed
    with pytest.warns(DeprecationWarning):
        assert [m["content"] for m in chat.messages(1, 2)] == ["1", "2"]
    with pytest.warns(DeprecationWarning):
        assert [m["content"] for m in chat.messages(since=3)] == ["3"]
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidArgument):
        chat.messages(-1)


def test_a_scoped_session_reads_its_messages_as_a_list(durable_backend, key):
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.create(key=key)
    store.scope("users/alice").session("s1").append({"role": "user", "content": "alice"})
    store.save()
    fresh = MemoryStore.open(key=key)
    assert fresh.scope("users/alice").session("s1").messages == [{"role": "user", "content": "alice"}]
    assert fresh.session("s1").messages == []


def test_a_change_to_session_messages_is_refused_not_lost(local_backend, key):
    """``session.messages`` is read from the log when asked for: a change to the list would be lost, so it is
    refused (typed); the dicts are copies, so editing one changes nothing stored (found by the hostile review)."""
    import copy

    from flyteplugins_memory import MemoryStore, ReadOnlySnapshot

    store = MemoryStore.get_or_create(key=key)
    chat = store.session("chat")
    chat.append({"role": "user", "content": "m0"})
    store.save()
    messages = chat.messages
    for change in (
        lambda: messages.append({"role": "user", "content": "x"}),
        lambda: messages.extend([]),
        lambda: messages.__setitem__(0, {}),
        lambda: messages.__delitem__(0),
        messages.pop,
        messages.clear,
    ):
        with pytest.raises(ReadOnlySnapshot, match=r"session\.append"):
            change()
    messages[0]["content"] = "edited"
    assert MemoryStore.open(key=key).session("chat").messages == [{"role": "user", "content": "m0"}]
    assert copy.deepcopy(chat.messages) == [{"role": "user", "content": "m0"}]
