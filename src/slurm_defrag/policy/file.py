"""The policy file: versioned TOML (or YAML), validated at load with every error at once.

A bad file gives one message naming the file and each bad key, e.g.::

    policy.toml: limits.max_victims_per_plan: must be >= 0; protections.extra[1]: unknown
    protection 'foo', must be one of large-job, multi-node, no-checkpoint

Strategy arguments are validated by the strategy's own ``Args`` model (registry), and
their errors are reported in the same message with their full key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from slurm_defrag.config_files import one_line, parse_toml, read_text, value_error_text
from slurm_defrag.errors import InputError
from slurm_defrag.policy.base import Strategy
from slurm_defrag.policy.cost import CostConfig
from slurm_defrag.policy.drain import DrainConfig
from slurm_defrag.policy.limits import LimitsConfig
from slurm_defrag.policy.protections import ProtectionsConfig
from slurm_defrag.policy.registry import REGISTRY, known_names
from slurm_defrag.solver.parameters import SolverSettings

POLICY_VERSION = 1


def _known_strategy(name: str) -> str:
    if name not in REGISTRY:
        raise ValueError(f"unknown strategy '{name}', must be one of {known_names()}")
    return name


class StrategySpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, AfterValidator(_known_strategy)]
    args: dict[str, Any] = Field(default_factory=dict)


def _default_strategies() -> list[StrategySpec]:
    return [StrategySpec(name="free-nvlink-block")]


class Policy(BaseModel):
    """A whole policy file. Every table is optional; defaults are documented per field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1]
    protections: ProtectionsConfig = Field(default_factory=ProtectionsConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    cost: CostConfig = Field(default_factory=CostConfig)
    drain: DrainConfig = Field(default_factory=DrainConfig)
    solver: SolverSettings = Field(default_factory=SolverSettings)
    strategies: list[StrategySpec] = Field(default_factory=_default_strategies)

    def build_strategies(self) -> list[Strategy]:
        """Instantiate the configured strategies (args were validated at load)."""
        out = []
        for spec in self.strategies:
            entry = REGISTRY[spec.name]
            out.append(entry.factory(entry.args.model_validate(spec.args)))
        return out


def default_policy() -> Policy:
    return Policy(version=POLICY_VERSION)


# -- loading --------------------------------------------------------------------------

_MESSAGES = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
    "extra_forbidden": "unknown key",
    "missing": "required",
    "too_short": "must have at least {min_length} item(s)",
}


def _key(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + one_line(str(part))
    return out or "(top level)"


def _message(err: ErrorDetails) -> str:
    template = _MESSAGES.get(err["type"])
    ctx = err.get("ctx") or {}
    if template is not None:
        try:
            return template.format(**ctx)
        except KeyError:
            pass
    if err["type"] == "literal_error" and err["loc"] == ("version",):
        return f"this slurm-defrag reads version = {POLICY_VERSION}, found {_shown(err['input'])}"
    return one_line(err["msg"].removeprefix("Value error, "))


def _shown(value: object) -> str:
    """A value for a message: scalars in short, anything else by its type only (repr() of a
    shared nested structure can be exponential in the file's size)."""
    if isinstance(value, str | int | float | bool) or value is None:
        text = one_line(repr(value))
        return text if len(text) <= 40 else text[:37] + "..."
    return f"a {type(value).__name__}"


def _errors(exc: ValidationError, prefix: Sequence[int | str] = ()) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if p not in ("function-after", "function-before")]
        out.append(f"{_key([*prefix, *loc])}: {_message(err)}")
    return out


def parse_policy(data: Mapping[str, Any], source: Path | str = "<policy>") -> Policy:
    """Validate a parsed policy document; raise :class:`InputError` listing every problem."""
    problems: list[str] = []
    if "version" not in data:
        problems.append(f"version: required (add `version = {POLICY_VERSION}` at the top)")
    policy: Policy | None = None
    try:
        policy = Policy.model_validate(data)
    except ValidationError as exc:
        problems.extend(p for p in _errors(exc) if not p.startswith("version: required"))
    # Strategy arguments belong to each strategy's own model: validate them even when other
    # parts of the file are wrong, so that one run shows every mistake.
    strategies = data.get("strategies")
    if isinstance(strategies, list):
        for i, spec in enumerate(strategies):
            name = spec.get("name") if isinstance(spec, Mapping) else None
            if not isinstance(name, str) or name not in REGISTRY:  # a list name: unhashable
                continue
            args = spec.get("args", {})
            if not isinstance(args, Mapping):
                continue  # the Policy model already reported "args: not a table"
            try:
                REGISTRY[name].args.model_validate(args)
            except ValidationError as exc:
                problems.extend(_errors(exc, ("strategies", i, "args")))
    if problems or policy is None:
        raise InputError(f"{source}: " + "; ".join(problems))
    return policy


def load_policy(path: Path) -> Policy:
    """Read a ``.toml`` (or ``.yaml``/``.yml``) policy file."""
    text = read_text(path)
    yaml_file = path.suffix in (".yaml", ".yml")
    data = _load_yaml(text, path) if yaml_file else parse_toml(text, path)
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: (top level): expected a table of settings")
    return parse_policy(data, path)


def _load_yaml(text: str, path: Path) -> object:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a dependency; keep the message clear
        raise InputError(f"{path}: YAML policies need PyYAML (pip install pyyaml)") from None
    from slurm_defrag.policy.yaml_loader import NoAliasSafeLoader

    try:
        return yaml.load(text, Loader=NoAliasSafeLoader)
    except yaml.MarkedYAMLError as exc:
        where = f" at line {exc.problem_mark.line + 1}" if exc.problem_mark else ""
        what = exc.problem or exc.context or "syntax error"
        raise InputError(f"{path}: not valid YAML{where}: {one_line(what)}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {one_line(str(exc))}") from None
    except ValueError as exc:  # int("9" * 5000): beyond Python's int string limit
        raise InputError(f"{path}: not valid YAML: {value_error_text(exc)}") from None
    except RecursionError:
        raise InputError(f"{path}: not valid YAML: nested too deeply") from None
