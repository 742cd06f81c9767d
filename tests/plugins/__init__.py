"""Offline tests of the Slurm-side hooks (slurm-plugins/): rendered tables, the Lua writer,
busted, the epilog run directly. A package, so its helpers import as ``plugins.plugins_support``
from the live hook tests too (tests/e2e/live_hooks/)."""
