"""SLURM: is this process a task of an ``srun`` step, its place in the step, the step's port,
and requeueing the job after a preemption. Reads environment variables and calls ``scontrol``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping

from trainkit.errors import ConfigError

PORT_BASE, PORT_SPAN = 15000, 20000  # derived rendezvous ports: 15000-34999
STEPS_PER_JOB = 64  # a job's first 64 steps get ports no other job's first steps get
REQUEUE_ENV = "TRAINKIT_AUTO_REQUEUE"  # "0": never requeue the SLURM job after a preemption
# the stop signal after which the job is requeued (Lightning's requeue_signal): USR1, what
# sbatch --signal=USR1@N sends before the time limit; SIGTERM (scancel, the limit itself, node
# shutdown) saves and stops without requeueing unless set to TERM (the SIGTERM of a manual
# scontrol requeue comes with SLURM's own requeue: requeued_by_slurm)
REQUEUE_SIGNAL_ENV = "TRAINKIT_REQUEUE_SIGNAL"
# a resumed attempt that trains fewer steps than this made no progress (start-up took its time
# window; a stop signal is held until the first step, so a step is no proof of progress)
MIN_STEPS_ENV = "TRAINKIT_REQUEUE_MIN_STEPS"
DEFAULT_MIN_STEPS = 10
# how many such attempts in a row are still requeued; after them trainkit gives up
STALLED_ENV = "TRAINKIT_MAX_STALLED_REQUEUES"
DEFAULT_STALLED = 2
REQUEUE_SIGNALS = ("USR1", "TERM")


def _int(env: Mapping[str, str], key: str, default: int = 0) -> int:
    value = env.get(key, "")
    return int(value) if value.isdigit() else default


def in_step(env: Mapping[str, str]) -> bool:
    """Whether this process is a task that ``srun`` started: the step variables say so (a batch
    script and an ``salloc`` shell have a job but no step, whatever the job is named)."""
    return "SLURM_PROCID" in env and ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env)


def expand_counts(text: str) -> list[int]:
    """``SLURM_*TASKS_PER_NODE`` (``2(x3),1``) as one count per node: ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for part in filter(None, text.split(",")):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match:
            counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def first_host(nodelist: str) -> str:
    """``node[03-05,7],gpu1`` -> ``node03``."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        return "127.0.0.1"
    prefix, ranges = match.groups()
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def step_port(job_id: int, step_id: int) -> int:
    """The rendezvous port of one step of one job: distinct for concurrent steps of a job."""
    return PORT_BASE + (job_id * STEPS_PER_JOB + step_id) % PORT_SPAN


def step_shape(env: Mapping[str, str]) -> tuple[int, int, int]:
    """(tasks in the step, nodes it spans, tasks on this node) of an srun task."""
    world = _int(env, "SLURM_STEP_NUM_TASKS", _int(env, "SLURM_NTASKS", 1))
    nodes = _int(env, "SLURM_NNODES", _int(env, "SLURM_JOB_NUM_NODES", 1))
    nodes = max(1, _int(env, "SLURM_STEP_NUM_NODES", nodes))
    per_node = expand_counts(
        env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "")
    )
    node = _int(env, "SLURM_NODEID")
    local = per_node[node] if node < len(per_node) else max(1, world // nodes)
    return world, nodes, local


def step_id(env: Mapping[str, str]) -> int:
    """This task's step id (0 for the first srun of a job)."""
    return _int(env, "SLURM_STEP_ID", _int(env, "SLURM_STEPID"))


def check_not_batch_with_tasks(env: Mapping[str, str]) -> None:
    """A batch script (or salloc shell) of a job with several tasks runs one process: its other
    ranks never start unless srun starts them. Fail in one line instead of waiting for them."""
    tasks = _int(env, "SLURM_NTASKS", 1)
    if "SLURM_JOB_ID" in env and not in_step(env) and tasks > 1:
        raise ConfigError(
            "SLURM_NTASKS",
            tasks,
            "trainkit started by srun in a job with several tasks (this process is the job's "
            "script, not one of its tasks)",
            "start it with `srun trainkit fit ...` in the script, or ask for --ntasks=1 and let "
            "trainkit start trainer.devices ranks itself (see docs/clusters.md)",
        )


def job_fields(job_id: str) -> tuple[dict[str, str], str]:
    """``scontrol show job``'s fields of the job, or ``({}, why not)``."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return {}, "scontrol is not on PATH"
    try:
        shown = subprocess.run(
            [scontrol, "show", "job", "-o", job_id],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return {}, f"scontrol show job failed ({err})"
    fields = dict(
        item.split("=", 1) for item in shown.stdout.split() if "=" in item and item[0].isupper()
    )
    return fields, ""


def job_can_requeue(job_id: str) -> tuple[bool, str]:
    """Whether ``scontrol`` says the job is a batch job that may be requeued, and if not why."""
    fields, unknown = job_fields(job_id)
    if not fields:
        return False, unknown
    if fields.get("BatchFlag") != "1":
        return False, "it is not a batch job (requeue needs sbatch)"
    if fields.get("Requeue") != "1":
        return False, "it may not be requeued (sbatch --requeue, or JobRequeue=1 in slurm.conf)"
    return True, ""


def requeued_by_slurm(job_id: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether SLURM is requeueing the job itself (``scontrol requeue`` by hand, a preemption
    with PreemptMode=REQUEUE): it counts the restart as it sends its SIGTERM, so the job's
    ``Restarts`` is past this attempt's $SLURM_RESTART_COUNT."""
    fields, _ = job_fields(job_id)
    if fields.get("JobState", "").startswith("REQUEUE"):
        return True
    restarts, attempt = fields.get("Restarts", ""), environ.get("SLURM_RESTART_COUNT") or "0"
    return restarts.isdigit() and attempt.isdigit() and int(restarts) > int(attempt)


def requeue_signal() -> str:
    """The signal name (``SIGUSR1``) after which a preempted job is requeued; a bad
    $TRAINKIT_REQUEUE_SIGNAL is a one-line error (checked when a fit starts)."""
    given = os.environ.get(REQUEUE_SIGNAL_ENV, "").strip()
    name = given.upper().removeprefix("SIG") or "USR1"
    if name not in REQUEUE_SIGNALS:
        raise ConfigError(
            REQUEUE_SIGNAL_ENV,
            given,
            "USR1 (the default: what sbatch --signal=USR1@N sends) or TERM (requeue after "
            "scancel and the time limit too)",
            f"unset it for USR1; {REQUEUE_ENV}=0 never requeues",
        )
    return f"SIG{name}"


def max_stalled_requeues(environ: Mapping[str, str] = os.environ) -> int:
    """How many resumed attempts in a row may train too few steps and still be requeued."""
    return _count(environ, STALLED_ENV, DEFAULT_STALLED)


def requeue_min_steps(environ: Mapping[str, str] = os.environ) -> int:
    """The training steps a resumed attempt must make to count as progress."""
    return _count(environ, MIN_STEPS_ENV, DEFAULT_MIN_STEPS)


def _count(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, str(default))
    if not raw.isdigit():
        raise ConfigError(name, raw, "an int >= 0", f"unset it for {default}")
    return int(raw)


def requeue_after_preemption(
    is_global_zero: bool, stopped_by: str | None, stalled: int = 0
) -> None:
    """On global rank 0 of a SLURM batch job, once every rank saved after ``stopped_by`` (the
    stop signal's name): ``scontrol requeue $SLURM_JOB_ID`` if that is the requeue signal, so
    the job runs again and resumes from ``last`` (Lightning's auto_requeue); any other signal
    (scancel's SIGTERM) leaves the job as the scheduler ends it. ``TRAINKIT_AUTO_REQUEUE=0``
    turns requeueing off."""
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if not is_global_zero or not job_id or os.environ.get(REQUEUE_ENV, "1") == "0":
        return
    wanted = requeue_signal()
    if requeued_by_slurm(job_id):
        print(
            f"trainkit: stopped by {stopped_by}; SLURM is requeueing job {job_id} itself "
            "(scontrol requeue, or a preemption that requeues); when it starts again it resumes "
            "from last.ckpt",
            file=sys.stderr,
            flush=True,
        )
        return
    if stopped_by != wanted:
        print(
            f"trainkit: stopped by {stopped_by}; not requeueing SLURM job {job_id}: only "
            f"{wanted} requeues it (sbatch --signal={wanted.removeprefix('SIG')}@120 sends it "
            f"before the time limit; scancel and the limit itself send SIGTERM; "
            f"{REQUEUE_SIGNAL_ENV}=TERM requeues after those too)",
            file=sys.stderr,
            flush=True,
        )
        return
    bound = max_stalled_requeues()
    if stalled > bound:
        print(
            f"trainkit: not requeueing SLURM job {job_id}: its last {stalled} resumed attempts "
            f"each trained fewer than {requeue_min_steps()} steps (start-up takes the time "
            "window); give the job more time or an earlier --signal, then resubmit it "
            f"({STALLED_ENV}={bound}, {MIN_STEPS_ENV}={requeue_min_steps()})",
            file=sys.stderr,
            flush=True,
        )
        return
    can, why = job_can_requeue(job_id)
    if not can:
        print(f"trainkit: not requeueing SLURM job {job_id}: {why}", file=sys.stderr, flush=True)
        return
    done = subprocess.run(
        ["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        print(
            f"trainkit: scontrol requeue {job_id} failed: {reason[-1] if reason else done.returncode}",
            file=sys.stderr,
            flush=True,
        )
        return
    print(
        f"trainkit: requeued SLURM job {job_id} (scontrol requeue); when it starts again it "
        f"resumes from last.ckpt ({REQUEUE_ENV}=0 turns this off)",
        file=sys.stderr,
        flush=True,
    )
