"""Sum pytest JUnit XML reports into one closing line: 'total: N passed, N failed, N skipped'.

The test script runs pytest in several phases (with and without services); CI and people
want one figure for the whole run.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(paths: list[str]) -> int:
    tests = failed = skipped = 0
    for p in paths:
        if not Path(p).exists():
            continue
        root = ET.parse(p).getroot()
        for suite in root.iter("testsuite"):
            tests += int(suite.get("tests", 0))
            failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skipped += int(suite.get("skipped", 0))
    passed = tests - failed - skipped
    print(f"total: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
