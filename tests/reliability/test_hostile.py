"""Hostile remote contents: every store in ``tests/reliability/hostile/corpus.json`` is placed directly in storage,
then opened and used. Each gives a typed error or a safe result: never an untyped crash, never a write
outside the local root, and a store that refuses to open is left exactly as it was."""

from __future__ import annotations

import base64
import json
import pathlib
from datetime import timedelta

import pytest

import flyteplugins_memory
from flyteplugins_memory import MemoryStore, MemoryStoreError
from flyteplugins_memory._rules.layout import sidecar_name
from reports import report

CORPUS = json.loads((pathlib.Path(__file__).parent / "hostile" / "corpus.json").read_text())
BACKENDS = ("local", "memory", "s3")


def content(spec: dict) -> bytes:
    """Bytes of one corpus object (see the corpus's "about")."""
    if "text" in spec:
        return spec["text"].encode()
    if "json" in spec:
        return json.dumps(spec["json"]).encode()
    if "b64" in spec:
        return base64.b64decode(spec["b64"])
    if "repeat" in spec:
        text, times = spec["repeat"]
        return (text * times).encode()
    if "json_list" in spec:
        item, times = spec["json_list"]
        return json.dumps([item] * times).encode()
    if "template" in spec:
        text, fill, times = spec["template"]
        return text.replace("@", fill * times).encode()
    raise ValueError(f"unknown object spec {sorted(spec)}")


def expected_text(value: str | dict) -> str:
    return value if isinstance(value, str) else content(value).decode()


#: one (backend, case, outcome) per run, reported after the module
OUTCOMES: list[tuple[str, str, str]] = []


@pytest.fixture(scope="module", autouse=True)
def hostile_report():
    yield
    if OUTCOMES:
        report(
            "hostile",
            {
                "cases": len(CORPUS["cases"]),
                "runs": len(OUTCOMES),
                "refused_at_open": sum(o == "refused" for *_, o in OUTCOMES),
                "opened_with_refused_operations": sum(o == "partly" for *_, o in OUTCOMES),
                "opened_fully": sum(o == "opened" for *_, o in OUTCOMES),
            },
        )


CASES = [
    pytest.param(backend, case, id=f"{backend}-{case['name']}")
    for case in CORPUS["cases"]
    for backend in case.get("backends", BACKENDS)
]


def place(backend, key: str, case: dict, outside: pathlib.Path) -> None:
    if case["base"] == "ours":
        # the corpus's records name these files' blobs: keep them out of the in-place upload (`_journal.inplace`)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("flyteplugins_memory._journal.inplace.places_in_place", lambda remote: False)
            store = MemoryStore.create(key=key)
            store.write_text("notes/a.md", "alpha")
            store.write_text("b.txt", "beta")
            store.append({"role": "user", "content": "hello"})
            store.save()
    else:
        for name, spec in CORPUS["bases"][case["base"]].items():
            backend.put(key, name, content(spec))
    for name in case.get("remove", []):
        backend.remove(key, *where(name))
    for name, spec in case.get("objects", {}).items():
        if spec.get("remove"):
            backend.remove(key, *where(name))
        else:
            stored_name, old = where(name)
            backend.put(key, stored_name, content(spec), old=old)
    for name, target in case.get("links", {}).items():
        link = pathlib.Path(backend.location(key, *where(name)))
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(outside.parent / target)


def where(name: str) -> tuple[str, bool]:
    """A corpus object name and whether it addresses the old journal (``old:meta/.journal/...``, inside the
    store prefix); plain ``meta/.journal/...`` names address the journal where it lives now."""
    return (name[len("old:") :], True) if name.startswith("old:") else (name, False)


def tree(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def exercise(store: MemoryStore) -> dict[str, str]:
    """Every reading and writing operation; returns ``{operation: error class}`` for those refused."""
    refused: dict[str, str] = {}

    def attempt(name: str, call) -> None:
        try:
            call()
        except MemoryStoreError as exc:
            refused[name] = type(exc).__name__

    paths = store.list_paths()
    for path in paths:
        attempt(f"read_text:{path}", lambda p=path: store.read_text(p))
        attempt(f"get_meta:{path}", lambda p=path: store.get_meta(p))
        attempt(f"list_versions:{path}", lambda p=path: [store.read_version(v) for v in store.list_versions(p)])
    attempt("audit_tail", lambda: store.audit_tail(0))
    attempt("exists", lambda: [store.exists(p) for p in paths])
    attempt("save", lambda: (store.write_text("fresh.txt", "fresh"), store.save()))
    attempt("refresh", store.refresh)
    attempt("gc", lambda: (store.gc(), store.gc(window=timedelta(0))))
    return refused


@pytest.mark.parametrize(("backend_name", "case"), CASES)
def test_hostile_store_gives_a_typed_error_or_a_safe_result(backend_name, case, request, key, tmp_path):
    backend = request.getfixturevalue(f"{backend_name}_backend")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    place(backend, key, case, outside)
    stored_before = backend.stored(key) if not case.get("links") else None
    outside_before = tree(tmp_path.parent) if backend_name == "local" else None

    if "open_error" in case:
        with pytest.raises(getattr(flyteplugins_memory, case["open_error"])):
            MemoryStore.get_or_create(key=key)
        if stored_before is not None:
            assert backend.stored(key) == stored_before, "a store that refused to open must be left alone"
        OUTCOMES.append((backend_name, case["name"], "refused"))
    else:
        store = MemoryStore.get_or_create(key=key)
        if "expect_files" in case:
            expected = {p: expected_text(v) for p, v in case["expect_files"].items()}
            assert {p: store.read_text(p) for p in store.list_paths()} == expected
        if "expect_messages" in case:
            assert len(store.messages) == case["expect_messages"]
        refused = exercise(store)
        assert refused == case.get("op_errors", {})
        paths = store.list_paths()
        allowed = {*paths, *map(sidecar_name, paths), "messages.json", "audit/log.jsonl"}  # upstream's layout
        assert {n for n in tree(store.root) if not n.startswith("versions/")} <= allowed
        reopened = MemoryStore.get_or_create(key=key)
        assert reopened.read_text("fresh.txt") == "fresh"
        OUTCOMES.append((backend_name, case["name"], "partly" if refused else "opened"))

    assert (outside / "secret.txt").read_text() == "secret" and len(list(outside.iterdir())) == 1
    if outside_before is not None:  # nothing appeared next to the test's own directory
        assert tree(tmp_path.parent).keys() - outside_before.keys() <= {
            k for k in tree(tmp_path.parent) if k.startswith(tmp_path.name + "/")
        }


def test_the_corpus_covers_what_the_issue_lists():
    names = {case["name"] for case in CORPUS["cases"]}
    for needed in ("symlink-file-out-of-store", "dotdot-file-name", "record-path-dotdot", "messages-not-a-list"):
        assert needed in names
    kinds = {case["name"].split("-")[0] for case in CORPUS["cases"]}
    assert {"sidecar", "record", "checkpoint", "head", "messages", "audit", "huge", "blob"} <= kinds
    assert {"log", "old", "config", "purge"} <= kinds  # issue 8: markers, the old location, settings
