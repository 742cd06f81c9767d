"""Packing: steer new small jobs onto nodes already in use, through node ``Weight``.

Slurm fills lower-weight nodes first. Raising the weight of GPU nodes with every GPU
free keeps them whole for the big NVLink jobs, and small jobs land beside running work.
Only weights change: a job that needs a whole node still gets one.

Original weights are recorded in the database before the first change (steps of one
open ``packing`` record in the plans table: ``weight`` on node, args ``original`` and
``weight``), so they survive a crash and are restored when packing is disabled or the
service stops. Every change goes through the auditing writer.
"""

from __future__ import annotations

import logging

from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.store.plans import NewStep, PlanRecord, Plans

log = logging.getLogger(__name__)

KIND = "packing"


def is_packing(rec: PlanRecord) -> bool:
    return rec.inputs.get("kind") == KIND


class Packer:
    def __init__(self, writer: AuditingWriter, plans: Plans, bump: int) -> None:
        self.writer = writer
        self.plans = plans
        self.bump = bump

    def _record(self) -> PlanRecord | None:
        return next(
            (p for p in self.plans.recent(open_only=True, limit=1000) if is_packing(p)), None
        )

    def originals(self) -> dict[str, int]:
        """node -> weight before our first change, from the open record."""
        rec = self._record()
        out: dict[str, int] = {}
        if rec is not None:
            for s in self.plans.steps(rec.id):
                if s.action == "weight":
                    out.setdefault(s.target, int(s.args["original"]))
        return out

    def apply(self, snapshot: ClusterSnapshot) -> int:
        """Bring every GPU node's weight to what packing wants; returns changes made."""
        originals = self.originals()
        rec = self._record()
        changes = 0
        for node in snapshot.nodes:
            if node.gpu_count == 0:
                continue
            current = node.weight if node.weight is not None else 1
            base = originals.get(node.name, current)
            whole_free = node.available and all(
                o is None for o in snapshot.gpu_owners.get(node.name, ())
            )
            want = base + self.bump if whole_free else base
            if want == current:
                continue
            if rec is None:
                pid = self.plans.create(snapshot.cluster, "enforce", {"kind": KIND})
                self.plans.update(
                    pid, status="applying", note="packing: node weights changed by slurm-defrag"
                )
                rec = self.plans.get(pid)
            (sid,) = self.plans.add_steps(
                rec.id, [NewStep("weight", node.name, {"original": base, "weight": want})]
            )
            self.plans.set_step_state(sid, "running")
            with self.writer.step(rec.id, sid):
                self.writer.update_node(node.name, Weight=str(want))
            self.plans.set_step_state(sid, "done")
            changes += 1
        if changes:
            log.info("packing: %d node weight(s) changed", changes)
        return changes

    def restore(self) -> int:
        """Put every weight we changed back and close the record; returns nodes restored."""
        rec = self._record()
        if rec is None:
            return 0
        originals = self.originals()
        for name, weight in sorted(originals.items()):
            (sid,) = self.plans.add_steps(
                rec.id, [NewStep("restore-weight", name, {"weight": weight})]
            )
            self.plans.set_step_state(sid, "running")
            with self.writer.step(rec.id, sid):
                self.writer.update_node(name, Weight=str(weight))
            self.plans.set_step_state(sid, "done")
        self.plans.update(rec.id, status="done", note="packing: original weights restored")
        log.info("packing: original weights of %d node(s) restored", len(originals))
        return len(originals)
