"""Ahead-of-time builds of the solutions' tuned kernels, recorded, so that CI does not rebuild every tile.

A build is a function of its job alone (kernel source, argument types, constexprs, options, target GPU) and of
the Triton installation (``triton_installation_key``: its sources, its compiler library and ptxas). The record
keys each result by a hash of both, so an edited kernel, another tile or another Triton misses it and is built.
Every call also rebuilds the recorded job closest to a limit (the most registers), so a record that no longer
tells the truth fails the test instead of passing it.

Refresh it after changing a tuned kernel (the slow tests then write what they built):

    COURSE_RECORD_BUILDS=1 .venv/bin/python -m pytest -q -n0 -p no:cacheprovider tests/test_kernels.py -k may_pick_compiles
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from course_utils.kernels import GpuBuild, run_builds, triton_installation_key

RECORD = Path(__file__).resolve().parent / "data" / "kernel_builds.json"


def job_key(job: dict[str, Any], installation: str) -> str:
    return hashlib.sha256(json.dumps([installation, job], sort_keys=True).encode()).hexdigest()


def _read() -> dict[str, dict[str, Any]]:
    return json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.exists() else {}


def recorded_builds(jobs: list[dict[str, Any]]) -> list[GpuBuild]:
    """The builds of ``jobs``, in order: recorded ones from the record, the rest built now.

    Raises:
        AssertionError: the recorded job rebuilt as a check gives another result than the record holds.
    """
    installation = triton_installation_key()
    keys = [job_key(job, installation) for job in jobs]
    record = _read()
    writing = os.environ.get("COURSE_RECORD_BUILDS") == "1"
    missing = [i for i, key in enumerate(keys) if writing or key not in record]
    recorded = [i for i in range(len(jobs)) if i not in missing]
    if recorded:  # the check: the recorded build nearest a register limit, built again
        missing.append(max(recorded, key=lambda i: record[keys[i]].get("registers") or 0))
    built = dict(zip(missing, run_builds([jobs[i] for i in missing])))
    for i in recorded:
        if i in built:
            assert built[i].as_data() == record[keys[i]], f"the build record is stale for {built[i].summary}: rebuild it (see {__name__})"
    if writing:
        record.update({keys[i]: build.as_data() for i, build in built.items()})
        RECORD.parent.mkdir(exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return [built[i] if i in built else GpuBuild(**record[keys[i]]) for i in range(len(jobs))]
