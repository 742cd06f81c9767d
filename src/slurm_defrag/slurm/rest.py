"""The ``rest`` backend: slurmrestd over HTTP (JWT) or a unix socket.

The API version is discovered once, newest first, with ``GET /slurm/<v>/ping`` (a 404
means this slurmrestd does not serve that version): Slurm 22.05 serves v0.0.36-38, 24.11
v0.0.40-42, 26.05 v0.0.42-45 (recorded: tests/fixtures/slurm-26.05). Responses are
mapped by :mod:`slurm_defrag.slurm.parse.openapi`, the same code the cli backend uses for
``--json`` output.

Writes go through the endpoints the discovered version has. slurmrestd has no requeue
endpoint at all, creates reservations only from v0.0.43 (Slurm 25.05), and updates nodes
only from data_parser versions (23.02+); those calls raise
:class:`~slurm_defrag.slurm.failures.SlurmRejectedError` saying so — use the cli backend to
act on such clusters.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.errors import InputError
from slurm_defrag.slurm import ids
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import (
    SlurmParseError,
    SlurmRejectedError,
    SlurmUnavailableError,
    from_failure,
)
from slurm_defrag.slurm.parse import openapi
from slurm_defrag.slurm.parse.mapping import Doc
from slurm_defrag.slurm.port import NewReservation, SlurmWriter, WriteKind
from slurm_defrag.slurm.snapshot_assembly import Parts, assemble
from slurm_defrag.slurm.update_fields import job_field, node_field

API_VERSIONS = (
    "v0.0.45",
    "v0.0.44",
    "v0.0.43",
    "v0.0.42",
    "v0.0.41",
    "v0.0.40",
    "v0.0.39",
    "v0.0.38",
)
"""Tried newest first. v0.0.36/37 (Slurm 21.08) answer in the v0.0.38 shape but are not
probed: 22.05 serves v0.0.38 alongside them."""

_DATA_PARSER = (0, 0, 39)
"""The first data_parser version (Slurm 23.02): node updates, reservation deletes, numbers
as ``{"set", "number"}`` objects."""
_RESERVATION_CREATE = (0, 0, 43)
"""The first version with a reservation create endpoint (Slurm 25.05)."""


def writes_refused(version: str) -> dict[WriteKind, str]:
    """The kinds of write slurmrestd serving API ``version`` can never make, with why."""
    v = openapi.api_version(version)
    refused: dict[WriteKind, str] = {"requeue": "requeue jobs (slurmrestd has no requeue endpoint)"}
    if v < _RESERVATION_CREATE:
        refused["reservation"] = f"create reservations (slurmrestd {version} cannot)"
    if v < _DATA_PARSER:
        refused["drain"] = f"drain/resume nodes (slurmrestd {version} cannot)"
        refused["packing"] = f"node Weight (slurmrestd {version} cannot)"
    return refused


def default_client(settings: SlurmSettings) -> httpx.Client:
    if settings.rest_socket is not None:
        # Over a socket the host part is ignored; any base URL will do.
        transport = httpx.HTTPTransport(uds=str(settings.rest_socket))
        return httpx.Client(
            base_url="http://slurmrestd", transport=transport, timeout=settings.rest_timeout_s
        )
    return httpx.Client(base_url=settings.rest_url, timeout=settings.rest_timeout_s)


class RestSlurm(SlurmWriter):
    """Reader and (partial, see module docstring) writer over slurmrestd."""

    name = "rest"

    def __init__(
        self,
        settings: SlurmSettings | None = None,
        client: httpx.Client | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings or SlurmSettings(backend="rest")
        self._client = client or default_client(self.settings)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._version: str | None = self.settings.rest_api_version

    # -- plumbing ----------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        try:
            token = self.settings.token()
        except OSError as exc:
            raise InputError(
                f"{self.settings.rest_token_file}: cannot read the slurmrestd token: {exc.strerror}"
            ) from None
        if token is None:
            return {}
        return {"X-SLURM-USER-NAME": self.settings.rest_user, "X-SLURM-USER-TOKEN": token}

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        what = f"{method} {path}"
        try:
            return self._client.request(method, path, headers=self._headers(), json=body)
        except httpx.TimeoutException:
            raise SlurmUnavailableError(
                f"Slurm unavailable: {what}: slurmrestd did not answer in time"
            ) from None
        except httpx.TransportError as exc:
            raise SlurmUnavailableError(f"Slurm unavailable: {what}: {exc}") from None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; the JSON body, or the matching Slurm error."""
        return self._decode(self.request(method, path, body), f"{method} {path}")

    def _decode(self, resp: httpx.Response, what: str) -> Any:
        try:
            # A byte that is not UTF-8 (a job name as its owner typed it) becomes U+FFFD in
            # that field only, as in the cli backend's runner, instead of failing the read.
            data = json.loads(resp.content.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            # Not JSON, an integer of over 4,300 digits (ValueError), or nested deeper
            # than the parser recurses.
            data = None
        if resp.status_code in (401, 403):
            raise SlurmRejectedError(
                f"Slurm rejected {what}: HTTP {resp.status_code}, slurmrestd refused the "
                "credentials (check rest_user and the JWT)"
            )
        if resp.status_code >= 400:
            detail = _error_text(data) or resp.text.strip() or resp.reason_phrase
            if resp.status_code in (502, 503, 504):
                # slurmrestd is up but cannot reach slurmctld (24.11 answers 502).
                raise SlurmUnavailableError(
                    f"Slurm unavailable: {what}: HTTP {resp.status_code}: {detail}"
                )
            raise from_failure(what, f"HTTP {resp.status_code}: {detail}")
        if data is None:
            raise SlurmParseError(f"{what}: response is not JSON")
        openapi.check_errors(data, what)
        return data

    def api_version(self) -> str:
        """The newest API version this slurmrestd answers a ping on (cached)."""
        if self._version is None:
            for v in API_VERSIONS:
                resp = self.request("GET", f"/slurm/{v}/ping")
                if resp.status_code == 404:
                    continue
                self._decode(resp, f"GET /slurm/{v}/ping")  # raises the error, if any
                self._version = v
                break
            else:
                raise SlurmRejectedError(
                    "Slurm rejected GET /slurm/<version>/ping: slurmrestd serves none of "
                    + ", ".join(API_VERSIONS)
                )
        return self._version

    def _get(self, endpoint: str) -> tuple[openapi.V0038, Doc]:
        path = f"/slurm/{self.api_version()}/{endpoint}"
        data = self.call("GET", path)
        where = f"GET {path}"
        return openapi.family(data, where), Doc(data, where, "")

    # -- reader ------------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        taken_at = self._clock()
        fam, jobs = self._get("jobs")
        nodes = self._get("nodes")
        partitions = self._get("partitions")
        reservations = self._get("reservations")
        read = fam.read_jobs(jobs)
        parts = Parts(
            nodes=nodes[0].nodes(nodes[1]),
            jobs=read.jobs,
            partitions=partitions[0].partitions(partitions[1]),
            reservations=reservations[0].reservations(reservations[1], taken_at),
            cluster=fam.cluster(jobs),
            left_out=read.left_out,
        )
        return assemble(
            parts, source=self.name, taken_at=taken_at, settings=self.settings, where="rest"
        )

    # -- writer ------------------------------------------------------------------------

    def cannot_write(self) -> dict[WriteKind, str]:
        return writes_refused(self.api_version())

    def _data_parser(self, what: str) -> str:
        v = self.api_version()
        if openapi.api_version(v) < _DATA_PARSER:
            raise SlurmRejectedError(
                f"Slurm rejected {what}: slurmrestd {v} cannot do this; use the cli backend"
            )
        return v

    def create_reservation(self, r: NewReservation) -> None:
        name, nodes, duration_s, users, accounts, start = r.checked()
        v = self.api_version()
        if openapi.api_version(v) < _RESERVATION_CREATE:
            raise SlurmRejectedError(
                f"Slurm rejected create reservation {name}: slurmrestd {v} has no reservation "
                "create endpoint (needs v0.0.43, Slurm 25.05); use the cli backend"
            )
        begin = int((start or self._clock()).timestamp())
        body = {
            "reservations": [
                {
                    "name": name,
                    "node_list": list(nodes),
                    "users": list(users),
                    "accounts": list(accounts),
                    "start_time": _num(begin),
                    "duration": _num(max(1, math.ceil(duration_s / 60))),
                    "flags": ["IGNORE_JOBS"],
                }
            ]
        }
        self.call("POST", f"/slurm/{v}/reservations", body)

    def delete_reservation(self, name: str) -> None:
        name = ids.reservation_name(name)  # it becomes part of the URL path
        v = self._data_parser(f"delete reservation {name}")
        try:
            self.call("DELETE", f"/slurm/{v}/reservation/{name}")
        except SlurmRejectedError as exc:
            text = str(exc).lower()
            if "not found" not in text and "invalid reservation" not in text:
                raise

    def requeue(self, job_id: str, reason: str) -> None:
        job_id = ids.job_id(job_id)
        raise SlurmRejectedError(
            f"Slurm rejected requeue of job {job_id}: slurmrestd has no requeue endpoint; "
            "use the cli backend"
        )

    def update_job(self, job_id: str, **fields: str) -> None:
        job_id = ids.job_id(job_id)  # it becomes part of the URL path
        v = self.api_version()
        numbers = openapi.api_version(v) >= _DATA_PARSER  # v0.0.38 takes plain values
        body: dict[str, Any] = {}
        for key, value in fields.items():
            field = job_field(key, job_id, self.name)
            if field.rest == "begin_time":
                value = str(int(datetime.fromisoformat(value).timestamp()))
            body[field.rest] = _num(int(value)) if field.numeric and numbers else value
        self.call("POST", f"/slurm/{v}/job/{job_id}", body)

    def update_node(self, node: str, **fields: str) -> None:
        node = ids.node_name(node)  # it becomes part of the URL path
        v = self._data_parser(f"update node {node}")
        body: dict[str, Any] = {}
        for key, value in fields.items():
            k = node_field(key, node, self.name)
            body[k] = [value.upper()] if k == "state" else int(value) if k == "weight" else value
        self.call("POST", f"/slurm/{v}/node/{node}", body)


def _num(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


def _error_text(data: Any) -> str:
    return "; ".join(openapi.error_texts(data))
