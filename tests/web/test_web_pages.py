"""The web page's routes over a database the service wrote (FakeSlurm + SQLite)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from sqlalchemy import event

from service_helpers import CycleFactory
from slurm_defrag.service.http import Page
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans
from slurm_defrag.web import sources
from slurm_defrag.web.pages import web_pages
from slurm_defrag.web.sources import StoreSource
from slurm_defrag.wiring import build


def _get(pages: dict[str, Page], path: str, **query: str) -> tuple[int, Any]:
    resp = pages[path]({k: [v] for k, v in query.items()})
    return resp.status, json.loads(resp.body)


def test_an_empty_database_says_so(store: Store) -> None:
    pages = web_pages(StoreSource(store))
    code, body = _get(pages, "/api/snapshot")
    assert code == 404
    assert "no snapshot yet in database sqlite:///" in body["error"]
    assert _get(pages, "/api/history") == (
        200,
        {"series": [], "nodes": [], "worst": [], "since_text": "7d"},
    )
    assert _get(pages, "/api/plans") == (200, {"plans": []})


def test_map_history_and_the_dry_run_plan(make_cycle: CycleFactory, store: Store) -> None:
    assert make_cycle("dry-run").run().outcome == "planned"
    pages = web_pages(StoreSource(store))

    code, snap = _get(pages, "/api/snapshot")
    assert code == 200
    assert [n["name"] for n in snap["nodes"]] == ["node01", "node02", "node03", "node04"]
    assert sum(len(n["gpus"]) for n in snap["nodes"]) == 32
    assert [j["job_id"] for j in snap["starving"]] == ["110"]
    assert snap["snapshot_id"] == 1
    assert snap["origin"].startswith("database sqlite:///")
    assert pages["/api/snapshot"]({}).body == pages["/api/snapshot"]({}).body  # cached

    code, hist = _get(pages, "/api/history", since="520w")
    assert code == 200
    assert hist["snapshots"] == 1
    assert hist["series"][0]["unusable"] == 9
    assert hist["since_text"] == "520w"

    code, body = _get(pages, "/api/plans")
    assert code == 200
    (plan,) = body["plans"]
    assert (plan["mode"], plan["status"], plan["open"], plan["kind"]) == (
        "dry-run",
        "done",
        False,
        "defrag",
    )
    assert [t["job_id"] for t in plan["targets"] if t["served"]] == ["110"]
    assert plan["victims"]
    assert plan["reservation"].startswith("defrag-")
    assert [s["action"] for s in plan["steps"]][:2] == ["reserve", "requeue"]
    assert [c["argv"][1] for c in plan["commands"]] == ["create", "requeue", "update"]
    # Previewed, never issued: no exit code, and every reader says so.
    assert all(
        c["dry_run"] and not c["executed"] and c["exit_code"] is None for c in plan["commands"]
    )
    assert {c["outcome"] for c in plan["commands"]} == {"not executed (dry-run)"}
    assert "inputs" not in plan


def test_bad_parameters_are_400(store: Store) -> None:
    pages = web_pages(StoreSource(store))
    code, body = _get(pages, "/api/history", since="yesterday")
    assert code == 400
    assert "'yesterday' is not a duration" in body["error"]
    code, body = _get(pages, "/api/history", since="99999999999w")  # was a 500: overflow
    assert code == 400
    assert "longer than 3660 days" in body["error"]
    for bad in ("0", "201", "many"):
        code, body = _get(pages, "/api/plans", limit=bad)
        assert code == 400
        assert body["error"].startswith("limit:")


def test_static_files_are_served(store: Store) -> None:
    pages = web_pages(StoreSource(store))
    index = pages["/"]({})
    assert index.content_type.startswith("text/html")
    assert b'<script src="app.js"></script>' in index.body
    assert b"http" not in index.body.replace(b"http-equiv", b"")  # no CDN, nothing remote
    assert pages["/app.js"]({}).content_type.startswith("text/javascript")
    assert b"data-gpu" not in pages["/style.css"]({}).body


def test_wiring_adds_the_page_only_when_web_is_on(store: Store, tmp_path: Any) -> None:
    url = str(store.engine.url)
    kill = tmp_path / "STOP"
    off, off_store = build(ServiceSettings(db_url=url, kill_switch_file=kill))
    on, on_store = build(ServiceSettings(db_url=url, kill_switch_file=kill, web=True))
    try:
        assert "/api/snapshot" not in off.pages
        assert {"/", "/app.js", "/style.css", "/api/snapshot", "/api/history", "/api/plans"} <= set(
            on.pages
        )
    finally:
        off_store.close()
        on_store.close()


def _selects(store: Store) -> list[str]:
    """SQL SELECTs run on ``store`` from now on."""
    seen: list[str] = []
    event.listen(
        store.engine,
        "before_cursor_execute",
        lambda *args: seen.append(args[2]) if args[2].startswith("SELECT") else None,
    )
    return seen


def test_history_and_plans_are_cached_per_snapshot(make_cycle: CycleFactory, store: Store) -> None:
    cycle = make_cycle("dry-run")
    cycle.run()
    # the history window ends at the cycles' clock, not at the machine's (7 days after the
    # scenario's start the default window would hold nothing)
    pages = web_pages(StoreSource(store, clock=lambda: cycle.clock().timestamp()))
    first = {path: _get(pages, path) for path in ("/api/history", "/api/plans")}
    selects = _selects(store)
    again = {path: _get(pages, path) for path in ("/api/history", "/api/plans")}
    assert again == first
    assert len(selects) == 2  # the latest snapshot id, once per request
    assert _get(pages, "/api/history", since="1d")[1]["since_text"] == "1d"
    assert len(selects) > 3  # another window is computed, not served from the 7d one
    cycle.clock.tick(60)  # type: ignore[attr-defined]
    cycle.run()  # a new snapshot: everything is read again
    selects.clear()
    assert _get(pages, "/api/history")[1]["snapshots"] == 2
    assert len(selects) > 1


def test_plans_expire_within_a_snapshot(make_cycle: CycleFactory, store: Store) -> None:
    """A cycle stores its snapshot before its plans move on: plans also expire by age."""
    pages = web_pages(StoreSource(store, plans_max_age_s=0))
    make_cycle("off").run()
    assert _get(pages, "/api/plans") == (200, {"plans": []})
    Plans(store.engine).create("course", "dry-run", {})  # same snapshot, a new plan
    assert len(_get(pages, "/api/plans")[1]["plans"]) == 1


def test_page_reads_are_bounded_and_busy_is_503(
    make_cycle: CycleFactory, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tabs cannot take the service's whole connection pool: at most ``readers`` page
    requests read the database at once, the others wait a little, then get 503."""
    make_cycle("off").run()
    release = threading.Event()
    entered = threading.Event()
    real = sources.load_history

    def slow_history(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(sources, "load_history", slow_history)
    pages = web_pages(StoreSource(store, readers=1, wait_s=0.05))
    slow: list[tuple[int, Any]] = []
    reader = threading.Thread(target=lambda: slow.append(_get(pages, "/api/history")))
    reader.start()
    try:
        assert entered.wait(5)
        code, body = _get(pages, "/api/snapshot")
        assert code == 503
        assert body["error"].startswith("busy")
    finally:
        release.set()
        reader.join(10)
    assert slow[0][0] == 200
    assert _get(pages, "/api/snapshot")[0] == 200  # the turn was given back
