"""Slurm's output read into domain values: pure functions, no I/O of their own.

Every backend hands what it read (``--json`` documents, ``scontrol`` text, pyslurm's
dicts, ``sacct -P`` lines) to these modules, so one fact is read by one rule whatever
the backend:

* ``mapping.py`` - the field helpers every mapping shares (numbers, times, host lists,
  GRES, the NVLink convention of pending jobs), each failure a ``SlurmParseError``
  naming the field;
* ``openapi.py`` - the OpenAPI JSON of squeue/sinfo/scontrol ``--json`` and slurmrestd;
* ``scontrol_text.py`` - ``scontrol show`` text, read in Slurm's own record layout;
* ``records.py`` - one job record at a time (a record that does not read costs that job);
* ``cpu_memory.py`` - CPUs and memory of nodes and jobs, the same rules for every spelling;
* ``sacct.py`` - ``sacct -P`` output for ``report impact --sacct``.

Nothing here runs a command, opens a connection or imports a backend or ``discovery/``
(an import-linter contract in pyproject.toml): the parsers are tested on recorded output.
"""
