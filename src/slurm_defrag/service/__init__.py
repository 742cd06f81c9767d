"""The service: a scheduler loop beside slurmctld that applies defrag plans through Slurm.

Modules, one job each:

* :mod:`.settings` — typed settings (TOML file + ``SLURM_DEFRAG_*`` environment);
* :mod:`.preemption_history` — the limits' :class:`PreemptionHistory` read from the plans table;
* :mod:`.loop` — one cycle: lease, read, persist, advance or plan, and hand the plan to
  the actuator (:mod:`slurm_defrag.actuator`: executor, audit, packing, kill switch);
* :mod:`.http` — ``POST /trigger`` and ``GET /healthz`` on localhost;
* :mod:`.runner` — APScheduler job, lease renewal, clean stop;
* :mod:`.observer` — what the cycle tells the exporter; :mod:`.prometheus` — ``/metrics``;
* :mod:`.logs` — text or JSON log lines;
* the composition root is :mod:`slurm_defrag.wiring`, above this package and the web page.

Design notes: ``docs/service.md``.
"""
