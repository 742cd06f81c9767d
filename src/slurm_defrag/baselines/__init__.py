"""Victim selection the way other schedulers do it, to compare the planner against.

* :mod:`.slurm_greedy`: Slurm's preemption (preempt/partition_prio, preempt/qos with
  select/cons_tres), as read from its documentation and source: candidates sorted, removed
  one at a time until the job fits.
* :mod:`.free_node`: a "free this node" heuristic of the KAI-scheduler kind: per node,
  evict in victim order until the job fits, pick the node needing the fewest victims.

Both respect the policy's protections (protected = not preemptable) so that the comparison
is about choosing victims, not about what may be touched.
"""
