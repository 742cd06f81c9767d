"""The service's per-job route (packing_lever fgd-route-score): node features, the route
file job_submit.lua reads (checked here with the real script, through lupa), the
workload mix counted from the cluster's jobs, and the clean-up order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lupa import lua51  # the sim extra, part of the dev install: never skipped

from service_helpers import CycleFactory, FakeClock
from slurm_defrag.actuator import packing
from slurm_defrag.actuator.route_file import STAMP, RouteFile
from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.service.loop import Cycle
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.sim.submit_hook import default_script
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.synth import EPOCH

LEVER = "fgd-route-score"


def _node(name: str) -> Node:
    return Node(
        name=name,
        partitions=("batch",),
        state=frozenset({"IDLE"}),
        gpu_model="a100",
        gpu_count=8,
        topology="nvswitch-8",
        cpus=64,
        features=("ib",),
    )


@pytest.fixture
def fake(clock: FakeClock) -> FakeSlurm:
    """g1 runs a 6-GPU job; g2 and g3 are idle; a 6-GPU job waits."""
    running = Job(
        id="1",
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH,
        gpus={"g1": frozenset(range(6))},
        cpus_per_node=4,
    )
    waiting = Job(
        id="2",
        partition="batch",
        state=JobState.PENDING,
        request=GpuRequest(gpus_per_node=6),
        cpus_per_node=4,
    )
    snap = ClusterSnapshot(
        taken_at=EPOCH,
        nodes=(_node("g1"), _node("g2"), _node("g3")),
        jobs=(running, waiting),
    )
    return FakeSlurm(snap, clock=clock)


def _routed_cycle(make_cycle: CycleFactory, path: Path, **kw: object) -> Cycle:
    """A service instance with the route lever writing ``path``."""
    return make_cycle(packing_bump=0, packing_lever=LEVER, route_file=RouteFile(path, 180), **kw)


class Script:
    """job_submit.lua as slurmctld runs it, with a table naming the route file."""

    def __init__(self, route_file: Path) -> None:
        self.lua = lua51.LuaRuntime(unpack_returned_tuples=True)
        self.lua.execute(
            """
            local s = { SUCCESS = 0, NO_VAL = 4294967294, NO_VAL16 = 65534,
              JOB_SHARED_NONE = 0 }
            local function quiet() end
            s.log_info, s.log_debug, s.log_user = quiet, quiet, quiet
            ERRORS = {}
            s.log_error = function(fmt, ...) table.insert(ERRORS, string.format(fmt, ...)) end
            slurm = s
            DEFRAG_NODES_FILE = "/nonexistent/defrag_nodes.lua"
            """
        )
        self.lua.execute(default_script().read_text(encoding="utf-8"))
        self.lua.execute("ERRORS = {}")
        table: dict[str, Any] = {
            "version": 1,
            "default_partition": "batch",
            "route_file": str(route_file),
            "partitions": {"batch": {"types": [{"gpus": 8, "nodes": 3, "models": {}}]}},
        }
        d = self.lua.globals().slurm_defrag
        d.nodes = d.prepare_table(self.lua.table_from(table, recursive=True))

    def prefer(self, gpus: int, cpus: int = 1) -> str | None:
        jd = self.lua.table_from(
            {
                "min_nodes": 1,
                "max_nodes": 1,
                "min_cpus": cpus,
                "partition": "batch",
                "tres_per_node": f"gres/gpu:{gpus}",
            }
        )
        self.lua.globals().slurm_job_submit(jd, None, 0)
        errors = self.lua.globals().ERRORS
        assert len(errors) == 0, errors[1]
        p = jd["prefer"]
        return None if p is None else str(p)


def test_the_cycle_sets_features_writes_the_route_and_the_script_routes_by_it(
    make_cycle: CycleFactory, fake: FakeSlurm, tmp_path: Path
) -> None:
    path = tmp_path / "defrag_route.lua"
    cycle = _routed_cycle(make_cycle, path)
    cycle.run()
    for name in ("g1", "g2", "g3"):
        assert fake.nodes[name]["features"] == ["ib", f"defrag_at_{name}"]
    text = path.read_text(encoding="utf-8")
    assert text.startswith(STAMP + " ")
    # the mix: both jobs are 6-GPU requests, so 2 GPUs left on g1 are fragmented anyway
    # and a 1-GPU job goes there (it keeps g2 whole)
    script = Script(path)
    assert script.prefer(1) == "defrag_at_g1"
    assert script.prefer(1) == "defrag_at_g1"
    assert script.prefer(1) == "defrag_at_g2"  # g1 full in the script's copy
    # a second cycle: features are in place, only the route is rewritten
    updates = sum(c[0] == "update_node" for c in fake.calls)
    cycle.run()
    assert sum(c[0] == "update_node" for c in fake.calls) == updates
    assert path.read_text(encoding="utf-8").splitlines()[0] != text.splitlines()[0]


def test_restore_removes_the_route_before_the_features(
    make_cycle: CycleFactory, fake: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "defrag_route.lua"
    seen: list[str] = []
    monkeypatch.setattr(
        "slurm_defrag.actuator.packing.time.sleep", lambda s: seen.append(f"sleep {s}")
    )
    cycle = _routed_cycle(make_cycle, path)
    cycle.run()
    real_update = fake.update_node

    def update(node: str, **fields: str) -> None:
        seen.append(f"update {node} exists={path.exists()}")
        real_update(node, **fields)

    monkeypatch.setattr(fake, "update_node", update)
    cycle.shutdown()
    assert not path.exists()
    assert seen[0] == f"sleep {packing.ROUTE_SETTLE_S}"
    assert seen[1:] == [f"update {n} exists=False" for n in ("g1", "g2", "g3")]
    assert all(fake.nodes[n]["features"] == ["ib"] for n in ("g1", "g2", "g3"))


def test_no_route_before_any_job_is_seen(
    make_cycle: CycleFactory, clock: FakeClock, tmp_path: Path
) -> None:
    empty = FakeSlurm(ClusterSnapshot(taken_at=EPOCH, nodes=(_node("g1"),)), clock=clock)
    path = tmp_path / "defrag_route.lua"
    cycle = _routed_cycle(make_cycle, path, reader=empty)
    cycle.run()
    assert not path.exists()


def test_the_route_levers_need_a_route_file() -> None:
    with pytest.raises(ValueError, match="route_file: packing_lever fgd-route-score"):
        ServiceSettings(packing=True, packing_lever=LEVER)
    ok = ServiceSettings(packing=True, packing_lever=LEVER, route_file=Path("/run/route.lua"))
    assert ok.route_file == Path("/run/route.lua")
    ServiceSettings(packing=False, packing_lever=LEVER)  # not applied: nothing to write


def test_a_restarted_service_weighs_by_the_jobs_its_database_saw(
    make_cycle: CycleFactory, fake: FakeSlurm, tmp_path: Path
) -> None:
    path = tmp_path / "defrag_route.lua"
    make_cycle(mode="dry-run").run()  # a dry-run week: snapshots stored, nothing routed
    fake.jobs.clear()  # the jobs ended; the queue is empty when the service restarts
    cycle = _routed_cycle(make_cycle, path)
    cycle.run()
    assert path.exists()
    text = path.read_text(encoding="utf-8")
    # the 6-GPU jobs of the stored snapshots: "mix <cpus> <gpus> ..."
    assert [line.split()[2] for line in text.splitlines() if line.startswith("mix ")] == ["6"]
    assert len(cycle.mix) == 2


def test_the_kill_switch_and_mode_off_stop_the_routing_at_once(
    make_cycle: CycleFactory, fake: FakeSlurm, tmp_path: Path
) -> None:
    path = tmp_path / "defrag_route.lua"
    cycle = _routed_cycle(make_cycle, path)
    cycle.run()
    assert path.exists()
    (tmp_path / "STOP").touch()
    assert cycle.run().outcome == "off"
    assert not path.exists()
    # the features stay: a job routed just before still names one that exists
    assert "defrag_at_g1" in fake.nodes["g1"]["features"]


def test_the_route_file_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="must be an absolute path"):
        ServiceSettings(packing=True, packing_lever=LEVER, route_file=Path("route.lua"))
