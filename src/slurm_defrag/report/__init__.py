"""Human views of snapshots and metrics (rich tables, GPU maps). No computation here."""
