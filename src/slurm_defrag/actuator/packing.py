"""Packing: steer new small jobs onto nodes already in use, through node ``Weight``.

Slurm fills lower-weight nodes first. Raising the weight of GPU nodes with every GPU
free keeps them whole for the big NVLink jobs, and small jobs land beside running work.
Only weights change: a job that needs a whole node still gets one.

Original weights are recorded in the database before the first change (steps of one
open ``packing`` record in the plans table: ``weight`` on node, args ``original`` and
``weight``), so they survive a crash and are restored when packing is disabled or the
service stops. Every change goes through the auditing writer.

:meth:`Packer.apply_levers` applies a lever of :mod:`slurm_defrag.packing.node_levers` (the
same function the simulator's slurm mode runs): Weights as above, and node features with
``scontrol update NodeName=.. AvailableFeatures=.. ActiveFeatures=..`` — the node's own
features (recorded before the first change, step ``features`` with args ``original``)
plus the slurm-defrag ones (``defrag_fit*``, ``defrag_at_*``) the lever wants this cycle.
The ``fgd-route`` levers also write the cycle's route for job_submit.lua
(:class:`~slurm_defrag.actuator.route_file.RouteFile`), after the features it names are
set; :meth:`Packer.restore` removes it before it removes them.
"""

from __future__ import annotations

import logging
import time

from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.actuator.route_file import RouteFile
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.packing.node_levers import MAX_WEIGHT, LeverSettings, compute_levers, is_ours
from slurm_defrag.store.plans import NewStep, PlanRecord, Plans

log = logging.getLogger(__name__)

KIND = "packing"
ROUTE_SETTLE_S = 2.0
"""Seconds between removing the route file and removing the features it named: the
script looks at the file at most once a second (job_submit.lua, ``ROUTE_CHECK_S``)."""


def is_packing(rec: PlanRecord) -> bool:
    return rec.inputs.get("kind") == KIND


class Packer:
    def __init__(
        self, writer: AuditingWriter, plans: Plans, bump: int, route: RouteFile | None = None
    ) -> None:
        self.writer = writer
        self.plans = plans
        self.bump = bump
        self.route = route
        """Where the ``fgd-route`` levers' table goes (None: those levers write none)."""

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

    def original_features(self) -> dict[str, tuple[str, ...]]:
        """node -> its features before our first change, from the open record."""
        rec = self._record()
        out: dict[str, tuple[str, ...]] = {}
        if rec is not None:
            for s in self.plans.steps(rec.id):
                if s.action == "features":
                    out.setdefault(s.target, tuple(s.args["original"]))
        return out

    def _open(self, snapshot: ClusterSnapshot, rec: PlanRecord | None) -> PlanRecord:
        if rec is not None:
            return rec
        pid = self.plans.create(snapshot.cluster, "enforce", {"kind": KIND})
        self.plans.update(
            pid, status="applying", note="packing: node weights changed by slurm-defrag"
        )
        return self.plans.get(pid)

    def _step(self, rec: PlanRecord, step: NewStep, node: str, **fields: str) -> None:
        (sid,) = self.plans.add_steps(rec.id, [step])
        self.plans.set_step_state(sid, "running")
        with self.writer.step(rec.id, sid):
            self.writer.update_node(node, **fields)
        self.plans.set_step_state(sid, "done")

    def apply_levers(self, snapshot: ClusterSnapshot, settings: LeverSettings) -> int:
        """One cycle of a packing lever: weights and features; returns updates made."""
        originals = self.originals()
        own_features = self.original_features()
        want = compute_levers(snapshot, settings, originals)
        rec = self._record()
        changes = 0
        for node in snapshot.nodes:
            fields: dict[str, str] = {}
            args: dict[str, object] = {}
            action = ""
            w = want.weights.get(node.name)
            current = node.weight if node.weight is not None else 1
            if w is not None and w != current:
                fields["Weight"] = str(w)
                args = {"original": originals.get(node.name, current), "weight": w}
                action = "weight"
            ours = want.features.get(node.name)
            if ours is not None:
                own = own_features.get(node.name, tuple(f for f in node.features if not is_ours(f)))
                new = tuple(own) + tuple(sorted(ours))
                if sorted(new) != sorted(node.features):
                    text = ",".join(new)
                    fields["AvailableFeatures"] = text
                    fields["ActiveFeatures"] = text
                    if not action:
                        action = "features"
                    if node.name not in own_features:
                        # recorded once, on its own step, so restore finds it
                        rec = self._open(snapshot, rec)
                        self._step(
                            rec,
                            NewStep("features", node.name, {"original": list(own)}),
                            node.name,
                            AvailableFeatures=text,
                            ActiveFeatures=text,
                        )
                        own_features[node.name] = tuple(own)
                        fields.pop("AvailableFeatures")
                        fields.pop("ActiveFeatures")
                        changes += 1
            if not fields:
                continue
            rec = self._open(snapshot, rec)
            if "Weight" in fields:
                step = NewStep("weight", node.name, args)
            else:
                step = NewStep("set-features", node.name, {"features": fields["ActiveFeatures"]})
            self._step(rec, step, node.name, **fields)
            changes += 1
        if changes:
            log.info("packing (%s): %d node update(s)", settings.lever, changes)
        if want.route is not None:
            if self.route is None:
                raise ValueError(f"lever {settings.lever}: no route file to write its table to")
            self.route.write(want.route)  # only now: every feature it names is set
        return changes

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
            want = min(base + self.bump, MAX_WEIGHT) if whole_free else base
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

    def stop_routing(self) -> bool:
        """Remove the route file, if any (the kill switch, ``mode = off``): a local file,
        no Slurm call, so it is safe whatever stopped the service's actions. The
        features stay: a job the script routed just before still names an existing one."""
        return self.route is not None and self.route.clear()

    def restore(self) -> int:
        """Put every weight we changed back and close the record; returns nodes restored.

        The route file goes first: job_submit.lua must stop naming the ``defrag_at_``
        features before they are removed (Slurm refuses a job whose ``--prefer`` names a
        feature no node has unless ``ignore_prefer_validation`` is set)."""
        if self.route is not None and self.route.clear():
            time.sleep(ROUTE_SETTLE_S)  # the script looks at the file once a second
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
        features = self.original_features()
        for name, own in sorted(features.items()):
            text = ",".join(own)
            self._step(
                rec,
                NewStep("restore-features", name, {"features": list(own)}),
                name,
                AvailableFeatures=text,
                ActiveFeatures=text,
            )
        self.plans.update(rec.id, status="done", note="packing: original weights restored")
        log.info(
            "packing: original weights of %d and features of %d node(s) restored",
            len(originals),
            len(features),
        )
        return len(set(originals) | set(features))
