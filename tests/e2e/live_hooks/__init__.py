"""Live tests of the Slurm-side hooks (slurm-plugins/) in a compose cluster's slurmctld; a
package so the ``installed`` fixture is scoped to these tests (installed before the first,
removed after the last)."""
