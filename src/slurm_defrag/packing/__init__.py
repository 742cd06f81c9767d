"""The packing levers: what Slurm itself is told so that it places new jobs tightly.

Beside the planner, not part of it: the planner (:func:`slurm_defrag.planner.facade.make_plan`)
frees room for waiting jobs by requeueing or draining; the levers steer where Slurm starts
jobs in the first place, by node Weights and features and by job_submit.lua's tables. Pure
(a :class:`~slurm_defrag.domain.cluster.ClusterSnapshot` in, numbers out); the service and
the actuator apply them to Slurm, the simulator to its state, the commands render them for
job_submit.lua. Modules:

* :mod:`.node_levers` — each lever's node Weights and features, and job_submit.lua's
  ``pack``, ``route`` and ``short_first`` entries;
* :mod:`.fit_classes` — FGD's fragmentation rise per request class on one node;
* :mod:`.workload_mix` — the request mix FGD weighs, counted from the cluster's own jobs;
* :mod:`.queue_order` — the queue-order boost's cap, a share of the site's priority range.
"""
