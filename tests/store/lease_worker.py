"""A stand-in service instance for the lease tests: contend for the lease, print changes.

    python lease_worker.py URL HOLDER TTL_S

Every ``TTL_S / 5`` it renews (if leader) or tries to acquire (if not), and prints a line
whenever its role changes: ``LEADER <holder> epoch=<n>`` or ``STANDBY <describe()>``.
Stops by itself after 120 s so a failed test never leaves it running.
"""

from __future__ import annotations

import sys
import time

from slurm_defrag.store.database import Store
from slurm_defrag.store.lease import Lease


def main() -> None:
    url, holder, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
    lease = Lease(Store.open(url), holder, ttl_s=ttl)
    role = ""
    stop = time.monotonic() + 120
    while time.monotonic() < stop:
        ok = lease.renew() if lease.held else lease.acquire()
        now = "LEADER" if ok else "STANDBY"
        if now != role:
            role = now
            line = f"LEADER {holder} epoch={lease.epoch}" if ok else f"STANDBY {lease.describe()}"
            print(line, flush=True)
        time.sleep(ttl / 5)
    lease.release()


if __name__ == "__main__":
    main()
