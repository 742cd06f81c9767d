"""The impact report on the web page: ``/api/impact`` over a database (the constructed
history of tests/impact_history.py), its notes when there is nothing to compare, its
errors for bad parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import impact_history as ih
from slurm_defrag.service.http import Page
from slurm_defrag.store.database import Store
from slurm_defrag.synth import course_scenario
from slurm_defrag.web.pages import web_pages
from slurm_defrag.web.sources import FileSource, StoreSource


def _get(pages: dict[str, Page], **query: str) -> tuple[int, Any]:
    resp = pages["/api/impact"]({k: [v] for k, v in query.items()})
    return resp.status, json.loads(resp.body)


def test_before_and_after_with_verdicts(store: Store) -> None:
    ih.build(store)
    pages = web_pages(StoreSource(store, clock=lambda: ih.NOW.timestamp()))
    code, body = _get(pages, since="1d")
    assert code == 200
    assert body["since_text"] == "1d"
    assert body["change_at"] == ih.CHANGE.isoformat()
    rows = {c["key"]: c for c in body["comparisons"]}
    assert rows["wait_all"]["before"] == 3.0
    assert rows["wait_all"]["after"] == 0.75
    assert rows["wait_all"]["verdict"] == "better"  # the interval leaves zero out
    assert rows["unusable_configuration"]["verdict"] == "no clear change"
    assert body["before"]["plans"] == {"done": 1}
    assert body["series"]
    # cached for the latest snapshot: the same bytes until a new snapshot is stored
    assert (
        pages["/api/impact"]({"since": ["1d"]}).body == pages["/api/impact"]({"since": ["1d"]}).body
    )
    code, given = _get(pages, since="1d", change_at="2026-06-01T12:00Z")
    assert code == 200
    assert given["change"] == "given (--change-at)"


def test_nothing_to_compare_is_a_note(store: Store, tmp_path: Path) -> None:
    code, body = _get(web_pages(StoreSource(store)))
    assert code == 200
    assert body["note"] == "no snapshots in the database yet: nothing to report"
    snap = course_scenario()
    code, body = _get(web_pages(FileSource(snap, tmp_path / "s.json")))
    assert (code, body["note"]) == (200, f"no history in a snapshot file {tmp_path / 's.json'}")


def test_bad_parameters_are_400(store: Store) -> None:
    pages = web_pages(StoreSource(store))
    code, body = _get(pages, since="soon")
    assert code == 400
    assert "--since" in body["error"]
    code, body = _get(pages, change_at="tomorrow-ish")
    assert code == 400
    assert "--change-at" in body["error"]
