"""What Slurm never reports, found on the hosts and in Slurm's own files: the NVLink topology.

* ``topology_sources.py`` - where each node's NVLink topology comes from, first source
  that covers it wins (gres.conf ``Links=``, an admin's map, the collector's files,
  templates);
* ``gres_conf.py`` - gres.conf ``Links=`` rows turned into topologies;
* ``nvidia_smi.py`` - ``nvidia-smi topo -m`` / ``nvlink --status`` on a GPU node
  (``slurm-defrag topology collect``);
* ``topology_block.py`` - multi-node NVLink domains from ``topology/block``
  (``scontrol show topology``, topology.conf);
* ``slurm_conf.py`` - slurm.conf's nodes, partitions and options (``plugins render``).

Discovery reads files and command output through the Slurm runner; it never imports a
backend (cli, rest, pyslurm, fake): the backends and the snapshot assembly call it.
"""
