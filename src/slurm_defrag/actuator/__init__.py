"""The actuator: the only code that acts on Slurm (descheduler's evictor).

Strategies and the planner propose; this package carries a plan out and enforces, again,
what the planner already respected. Modules, one job each:

* :mod:`.executor` — the plan protocol, one recorded step at a time, with its rollback;
* :mod:`.limits` — the policy's limits checked right before acting;
* :mod:`.audit` — the writer decorator that records every Slurm command;
* :mod:`.packing` — node weights that steer small jobs onto used nodes;
* :mod:`.killswitch` — the file whose presence stops all action;
* :mod:`.events` — what the executor tells an observer; :mod:`.step_errors` — retry vs give up.

It is handed its writer (the real backend, or the dry-run sandbox) by the service's cycle;
it never chooses one itself.
"""
