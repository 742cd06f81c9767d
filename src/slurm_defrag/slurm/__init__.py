"""Adapters to Slurm: the only code that runs Slurm commands or talks to slurmrestd/pyslurm.

Three rooms:

* here, the port and the backends: ``port.py`` defines what the rest of slurm-defrag may
  ask of Slurm; ``cli_backend.py``, ``rest.py`` and ``pyslurm_adapter.py`` implement it
  (``backends.py`` picks one by name); ``fake.py`` is an in-memory Slurm for unit tests and
  for dry-run; ``snapshot_assembly.py`` turns what a backend read into one snapshot;
  ``command_runner.py`` runs one command, ``ids.py`` checks what a writer passes on,
  ``scontrol_argv.py`` builds each write's command line, ``update_fields.py`` names the
  fields a writer may update, ``controller.py`` reads the controller for ``doctor``;
  ``failures.py`` (the three errors) and ``connection.py`` (how to reach Slurm);
* ``parse/``: Slurm's output (JSON, ``scontrol`` text, pyslurm dicts, ``sacct``) read
  into domain values, pure and backend-free;
* ``discovery/``: the NVLink topology Slurm never reports (gres.conf, nvidia-smi,
  topology/block, the topology sources) and slurm.conf.
"""
