"""A ReFrame Slurm backend for clusters without accounting (no slurmdbd).

ReFrame's ``slurm`` backend polls ``sacct``, which answers only where slurmdbd runs;
its ``squeue`` backend works anywhere but never learns a job's exit code or why it
ended, so every check that tests ``job.exitcode`` would fail with "exit code None".
This backend polls ``squeue`` like ReFrame's and, once a job has ended, asks
``scontrol show job`` (which keeps ended jobs for slurm.conf's MinJobAge) for its
final state and exit code, as ``sacct`` would have given them:

* ``job.exitcode``: the batch script's exit status, or 128 + signal when a signal
  ended it (Slurm's ``ExitCode=<status>:<signal>``);
* ``job.state``: COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, ... (Slurm's
  JobState);
* a job that Slurm ended itself (TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL,
  DEADLINE, PREEMPTED, or CANCELLED by someone other than ReFrame) fails the test in
  its run phase with a JobError that says so, e.g. ``Slurm ended job 12: TIMEOUT
  (Reason=TimeLimit, TimeLimit=00:01:00)``, instead of a bare "exit code 143".

A partition selects it with ``scheduler: ocibench-squeue``; :mod:`ocibench.reframe.site`
does so for shapes whose ``cluster.accounting`` is false.  Importing this module
registers it (``site/reframe_config.py`` imports ocibench.reframe.site, which imports
it).
"""

from __future__ import annotations

import re

import reframe.utility.osext as osext
from reframe.core.backends import register_scheduler
from reframe.core.exceptions import JobError
from reframe.core.schedulers.slurm import SqueueJobScheduler, slurm_state_completed

#: The registered name, as the configuration refers to it.
SQUEUE = "ocibench-squeue"

#: Seconds ``scontrol`` may take.
SCONTROL_TIMEOUT_S = 30

_FIELD = re.compile(r"(?:^|\s)(JobState|ExitCode|Reason|TimeLimit)=(\S+)")

#: End states in which Slurm, not the job script, ended the job.
KILLED_BY_SLURM = {"TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
                   "PREEMPTED", "CANCELLED"}


def parse_scontrol(text: str) -> dict[str, str]:
    """The JobState, ExitCode, Reason, TimeLimit fields of ``scontrol show job -o``."""
    return {key: value for key, value in _FIELD.findall(text)}


def exit_status(exitcode: str) -> int | None:
    """Slurm's ``<status>:<signal>`` as a shell would report it (128 + signal)."""
    match = re.fullmatch(r"(\d+):(\d+)", exitcode or "")
    if not match:
        return None
    status, signal = int(match.group(1)), int(match.group(2))
    return 128 + signal if signal else status


@register_scheduler(SQUEUE)
class SqueueScontrolJobScheduler(SqueueJobScheduler):
    """``squeue`` polling, then the ended job's state and exit code from ``scontrol``."""

    def poll(self, *jobs):
        super().poll(*jobs)
        for job in jobs:
            if job is None or job.exitcode is not None or job.is_cancelling:
                continue
            if not slurm_state_completed(job.state):
                continue
            done = osext.run_command(f"scontrol show job -o {job.jobid}",
                                     timeout=SCONTROL_TIMEOUT_S)
            fields = parse_scontrol(done.stdout)
            if "JobState" in fields:
                job._state = fields["JobState"]
            job._exitcode = exit_status(fields.get("ExitCode", ""))
            if fields.get("JobState") in KILLED_BY_SLURM and job.exception is None:
                job._exception = JobError(
                    f"Slurm ended job {job.jobid}: {fields['JobState']} "
                    f"(Reason={fields.get('Reason', '?')}, "
                    f"TimeLimit={fields.get('TimeLimit', '?')}, "
                    f"ExitCode={fields.get('ExitCode', '?')})", job.jobid)
