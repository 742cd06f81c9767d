"""What job_submit.lua accepts is what the service honours (issue #40): the rendered table
and the real script (lupa, Lua 5.1) on one side, the service's own protections and the
executor's reservation name on the other.

* ``defrag:protect`` in a user's comment: ``plugins render`` with and without
  ``--no-user-protect``, a submission through the script, and the planner's protections
  on the job as the script left it. The service honours the key from the AdminComment
  only (``policy/comment_keys.py``), so the one switch decides both.
* ``defrag-*`` reservations: the script refuses a user's submission or update naming one
  (the name the executor gives its reservations, ``Plan.reservation``), and lets the
  service's own hand-over (``scontrol update JobId=... ReservationName=defrag-<id>`` by
  ``--service-user``) through.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurm_defrag.cli import app
from slurm_defrag.domain.cluster import Job, JobState
from slurm_defrag.domain.plan import Plan
from slurm_defrag.policy.protections import ProtectionsConfig, compile_protections
from slurm_defrag.synth import EPOCH

from .hook_cost import CountedHook
from .test_render import COMPOSE, compose_conf

NO_VAL = 4294967294
OWNER, SERVICE, SOMEONE = 2001, 2000, 2002  # alice and defrag in docker/Dockerfile; bob
OPT_OUT = "owner opted out (defrag:protect)"


def rendered(tmp: Path, *options: str) -> Path:
    """defrag_nodes.lua as `plugins render` writes it for the compose cluster."""
    out = tmp / "defrag_nodes.lua"
    result = CliRunner().invoke(
        app,
        [
            "plugins",
            "render",
            "--slurm-conf",
            str(compose_conf(tmp)),
            "--gres-conf",
            str(COMPOSE / "gres.conf"),
            "-o",
            str(out),
            *options,
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def submitted(hook: CountedHook, uid: int, **fields: object) -> tuple[int, dict[str, object]]:
    desc = {"min_nodes": NO_VAL, "max_nodes": NO_VAL, "user_id": uid, "partition": "batch"}
    jd = hook.table(desc | fields)
    rc = hook.g.slurm_job_submit(jd, hook.table({}), uid)
    return int(rc), dict(jd.items())


def running(comment: str, admin_comment: str) -> Job:
    return Job.model_validate(
        {
            "id": "7",
            "name": "train",
            "user": "alice",
            "account": "research",
            "partition": "batch",
            "qos": "normal",
            "state": JobState.RUNNING,
            "start_time": EPOCH - timedelta(hours=2),
            "gpus": {"node01": frozenset({0})},
            "comment": comment,
            "admin_comment": admin_comment,
        }
    )


@pytest.mark.parametrize(("options", "protected"), [((), True), (("--no-user-protect",), False)])
def test_a_users_opt_out_protects_exactly_when_the_hook_takes_it(
    tmp_path: Path, options: tuple[str, ...], protected: bool
) -> None:
    """Defect (#40): with ``--no-user-protect`` the hook dropped the user's
    ``defrag:protect``, but the service read the user's Comment and kept the job
    protected."""
    hook = CountedHook(rendered(tmp_path, *options), ported=False)
    comment = "checkpointless defrag:protect"
    rc, jd = submitted(hook, OWNER, tres_per_node="gres/gpu:1", comment=comment)
    assert rc == 0
    admin = str(jd.get("admin_comment") or "")
    assert ("defrag:protect" in admin.split()) is protected
    if not protected:
        assert "not allowed on this cluster" in hook.logs("user")[0]
    reasons = compile_protections(ProtectionsConfig(), EPOCH).reasons(running(comment, admin))
    assert (OPT_OUT in reasons) is protected
    # the owner's later update of the Comment does not change the record (only root and
    # SlurmUser may write an AdminComment), and so not the decision either
    jd2 = hook.table({"comment": "defrag:protect"})
    rec = hook.table({"job_id": 7, "min_nodes": 1, "max_nodes": 1, "partition": "batch",
                      "tres_per_node": "gres/gpu:1", "admin_comment": admin})  # fmt: skip
    assert hook.g.slurm_job_modify(jd2, rec, hook.table({}), OWNER) == 0
    assert jd2["admin_comment"] is None


def test_an_admins_opt_out_is_honoured_whatever_the_switch() -> None:
    """The switch is about users: an AdminComment is root's or SlurmUser's to write."""
    reasons = compile_protections(ProtectionsConfig(), EPOCH).reasons(
        running("", "defrag:nvlink=1 defrag:gpn=1 defrag:nodes=1 defrag:protect")
    )
    assert OPT_OUT in reasons


def test_the_hook_writes_only_keys_the_table_reads_from_the_admin_comment(tmp_path: Path) -> None:
    """The one table of comment keys covers what the hook records, and says so."""
    from slurm_defrag.policy.comment_keys import COMMENT_KEYS, CommentField

    hook = CountedHook(rendered(tmp_path), ported=False)
    _, jd = submitted(
        hook, OWNER, tres_per_node="gres/gpu:2", comment="defrag:anygpu defrag:protect"
    )
    written = {t.partition("=")[0] for t in str(jd["admin_comment"]).split()}
    assert written == {"defrag:nvlink", "defrag:gpn", "defrag:nodes", "defrag:protect"}
    for key in written:
        assert CommentField.ADMIN in COMMENT_KEYS[key].fields, key
    assert COMMENT_KEYS["defrag:anygpu"].fields == (CommentField.USER,)  # the hook's only
    assert COMMENT_KEYS["defrag:protect"].fields == (CommentField.ADMIN,)


# -- defrag-* reservations ------------------------------------------------------------------


def test_only_the_service_puts_a_job_into_its_reservation(tmp_path: Path) -> None:
    """Defect (#40): a defrag reservation lists the target's user for the plan's TTL +
    300 s, so that user could run other jobs in it."""
    reservation = Plan.model_construct(plan_id="20261207T0612-3f2a").reservation
    assert re.fullmatch(r"defrag-[\w-]+", reservation)
    hook = CountedHook(rendered(tmp_path, "--service-user", str(SERVICE)), ported=False)
    assert hook.d.nodes["service_uid"] == SERVICE
    # the owner (listed in the reservation), or anyone else, submitting into it
    for uid in (OWNER, SOMEONE):
        rc, jd = submitted(hook, uid, tres_per_node="gres/gpu:1", reservation=reservation)
        assert rc == 2052  # ESLURM_RESERVATION_ACCESS
        assert jd.get("admin_comment") is None
    assert hook.logs("user")[-1] == (
        f"defrag: reservation {reservation} holds nodes for the one job slurm-defrag is "
        "starting there; no other job may use it"
    )
    # ...or moving a pending job of theirs into it
    rec = hook.table({"job_id": 8, "min_nodes": 1, "max_nodes": 1, "partition": "batch"})
    hand_over = hook.table({"reservation": reservation})  # what the executor sends
    assert hook.g.slurm_job_modify(hand_over, rec, hook.table({}), OWNER) == 2052
    # the service's hand-over, and root's, pass untouched; leaving it is anyone's right
    for uid in (SERVICE, 0):
        hand_over = hook.table({"reservation": reservation})
        assert hook.g.slurm_job_modify(hand_over, rec, hook.table({}), uid) == 0
        assert dict(hand_over.items()) == {"reservation": reservation}
    assert hook.g.slurm_job_modify(hook.table({"reservation": ""}), rec, hook.table({}), OWNER) == 0
    # other reservations are the site's business
    assert submitted(hook, OWNER, reservation="maint")[0] == 0


def test_without_service_user_only_root_and_slurm_user_may(tmp_path: Path) -> None:
    table = rendered(tmp_path)
    assert "service_uid" not in table.read_text(encoding="utf-8")
    hook = CountedHook(table, ported=False)
    assert submitted(hook, SERVICE, reservation="defrag-1")[0] == 2052
    assert submitted(hook, 0, reservation="defrag-1")[0] == 0  # SlurmUser=root here
