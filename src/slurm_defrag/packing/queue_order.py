"""The queue-order lever's bound: job_submit.lua's ``short_first`` boost, capped to a share
of the site's own priority range (issue #41 item 2).

priority/multifactor gives a pending job (``priority_multifactor.c``,
``_get_priority_internal``)::

    priority = site + sum(factor_i x PriorityWeight_i) + sum(tres_j x weight_j) - nice

every factor in [0, 1] (age, association, fair-share, job size, partition, QOS; each TRES
the job's share of the partition's), the site factor added as it is and the nice
subtracted. The *range* is what the weighted factors can add up to: the sum of the
``PriorityWeight*`` and of the ``PriorityWeightTRES`` weights. The script's boost is a
negative nice, so it is in the same units; uncapped it was ``tier x span + (span -
limit)``, up to 30,240 points whatever the weights: on a site with fair-share at 10,000 it
overrode fair-share for every large job, on one with weights in the millions it did
nothing. Now::

    raw   = tier x span + (span - min(limit, span))      in [0, 3 x span]
    cap   = floor(share x range)                          share: the admin's, default 10 %
    boost = floor(raw x cap / (3 x span))                 in [0, cap]

The order the script sets among boosted jobs (tier, then shortest limit) is kept (never
reversed: two raws a little apart may land on the same boost when the cap is small), and
no boost is worth more than ``share`` of what fair-share, QOS, age and the rest can give.
Cap 0 changes no job. :func:`capped` is the script's arithmetic in Python (the simulator
and the tests run the script itself).

priority/basic has no range (a job's priority is its place in submission order, and a
nice moves it past that many earlier submissions): the range is 0, so the cap is 0 and
the lever changes no job's priority there. The range is read from what Slurm is told:
slurm.conf (``plugins render``), or ``scontrol show config`` (``plugins render
--priority-config``, and ``doctor``, which compares the live range with the one a table
was rendered for). Not in the range: the site factor (set per job by a plugin or an
admin, unbounded) and ``PriorityFlags=NO_NORMAL_*`` (factors above 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from slurm_defrag.errors import InputError

WEIGHTS = ("Age", "Assoc", "FairShare", "JobSize", "Partition", "QOS")
"""The ``PriorityWeight<name>`` settings of priority/multifactor (Slurm's spelling)."""
DEFAULT_CAP_SHARE = 0.1
"""``plugins render --boost-cap``: the boost is at most 10 % of the site's priority range."""
BOOST_SPANS = 3
"""The largest raw boost, in spans: tier 2 plus a whole span (slurm-plugins/job_submit.lua,
``D.short_first_nice``)."""
NICE_LIMIT = 2147483645
"""The largest nice Slurm takes, either way (``NICE_OFFSET - 3``): a cap is at most this."""
MULTIFACTOR = "priority/multifactor"
BASIC = "priority/basic"


@dataclass(frozen=True)
class PriorityRange:
    """The priority plugin and the weights of a site, as one source states them."""

    plugin: str | None
    """``PriorityType`` as given; None when the source does not set it (the release's
    default applies)."""
    weights: tuple[tuple[str, float], ...] = ()
    """The non-zero weights: ``(name, weight)``, names as in :data:`WEIGHTS`, a TRES
    weight as ``TRES/<type>`` (``TRES/CPU``, ``TRES/GRES/gpu``)."""
    source: str = "slurm.conf"

    @property
    def basic(self) -> bool:
        return self.plugin is not None and self.plugin.strip().lower() == BASIC

    @property
    def points(self) -> int:
        """What the weighted factors can add up to (0 under priority/basic)."""
        if self.basic:
            return 0
        return math.floor(sum(w for _, w in self.weights))

    def cap(self, share: float) -> int:
        """The largest boost, in priority points: ``floor(share x range)``."""
        check_share(share)
        return min(NICE_LIMIT, math.floor(share * self.points))

    def describe(self) -> str:
        """``Age=1000,FairShare=10000`` (``none`` when every weight is 0)."""
        return ",".join(f"{k}={_number(w)}" for k, w in self.weights) or "none"


def _number(w: float) -> str:
    return str(int(w)) if w == int(w) else repr(w)


def check_share(share: float) -> float:
    if not (math.isfinite(share) and 0 <= share <= 1):
        raise InputError(
            f"--boost-cap: {share} is not a share of the priority range in [0, 1] (e.g. 0.1)"
        )
    return share


def _weight(text: str, what: str, source: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value < 2**32):
        raise InputError(f"{source}: {what} {text[:40]!r} is not a priority weight")
    return value


def read_range(settings: Mapping[str, object], source: str) -> PriorityRange:
    """The plugin and weights in ``settings`` (slurm.conf lines or ``scontrol show
    config``, keys in any case; ``(null)`` or empty is unset)."""
    lower = {k.lower(): str(v).strip() for k, v in settings.items()}

    def get(key: str) -> str:
        value = lower.get(key.lower(), "")
        return "" if value.lower() in ("(null)", "none") else value

    weights: list[tuple[str, float]] = []
    for name in WEIGHTS:
        text = get(f"PriorityWeight{name}")
        if text and (w := _weight(text, f"PriorityWeight{name}", source)):
            weights.append((name, w))
    for item in get("PriorityWeightTRES").split(","):
        tres, sep, text = item.strip().rpartition("=")
        if not item.strip():
            continue
        if not sep or not tres:
            raise InputError(f"{source}: PriorityWeightTRES item {item[:40]!r} is not TYPE=weight")
        if w := _weight(text, f"PriorityWeightTRES {tres}", source):
            weights.append((f"TRES/{tres}", w))
    return PriorityRange(get("PriorityType") or None, tuple(weights), source)


def capped(raw: int, cap: int | None, span: int) -> int:
    """The boost job_submit.lua gives a job whose uncapped boost is ``raw`` (None: no cap,
    the raw boost: the simulator without a priority model, tables rendered before)."""
    if cap is None:
        return raw
    return raw * cap // (BOOST_SPANS * span)
