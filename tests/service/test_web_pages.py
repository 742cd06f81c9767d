"""The web page's routes over a database the service wrote (FakeSlurm + SQLite)."""

from __future__ import annotations

import json
from typing import Any

from service_helpers import CycleFactory

from slurm_defrag.service.http import Page
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.service.wiring import build
from slurm_defrag.store.database import Store
from slurm_defrag.web.pages import web_pages
from slurm_defrag.web.sources import StoreSource


def _get(pages: dict[str, Page], path: str, **query: str) -> tuple[int, Any]:
    resp = pages[path]({k: [v] for k, v in query.items()})
    return resp.status, json.loads(resp.body)


def test_an_empty_database_says_so(store: Store) -> None:
    pages = web_pages(StoreSource(store))
    code, body = _get(pages, "/api/snapshot")
    assert code == 404
    assert "no snapshot yet in database sqlite:///" in body["error"]
    assert _get(pages, "/api/history") == (200, {"series": [], "nodes": [], "worst": [],
                                                 "since_text": "7d"})
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
        "dry-run", "done", False, "defrag")
    assert [t["job_id"] for t in plan["targets"] if t["served"]] == ["110"]
    assert plan["victims"]
    assert plan["reservation"].startswith("defrag-")
    assert [s["action"] for s in plan["steps"]][:2] == ["reserve", "requeue"]
    assert [c["argv"][1] for c in plan["commands"]] == ["create", "requeue", "update"]
    assert all(c["dry_run"] and c["exit_code"] == 0 for c in plan["commands"])
    assert "inputs" not in plan


def test_bad_parameters_are_400(store: Store) -> None:
    pages = web_pages(StoreSource(store))
    code, body = _get(pages, "/api/history", since="yesterday")
    assert code == 400
    assert "'yesterday' is not a duration" in body["error"]
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
        assert {"/", "/app.js", "/style.css", "/api/snapshot", "/api/history",
                "/api/plans"} <= set(on.pages)
    finally:
        off_store.close()
        on_store.close()
