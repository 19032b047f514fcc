"""The benchmarks run, measure what they say, and write their figures as JSON; the grading one in quick mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grading.models import STAGES

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args: str, out: Path, timeout: int = 300) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``benchmarks/<script>`` with ``--json out`` in out's folder; the process and its figures.

    The run must exit 0: its stdout and stderr tails are the message otherwise.
    """
    run = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / script), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=out.parent,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return run, json.loads(out.read_text())


def test_complexity_benchmark_quick_run_writes_consistent_figures(tmp_path: Path) -> None:
    run, figures = run_benchmark("complexity.py", "--quick", out=tmp_path / "complexity.json")
    rows = figures["rows"]
    assert {(row["method"], row["T"]) for row in rows} == {(m, T) for m in ("naive", "chunked", "builtin") for T in (256, 512, 1024)}
    for row in rows:
        assert row["seconds"] > 0, row
        assert row["max_abs_diff_vs_builtin"] < 1e-5, f"{row['method']} at T={row['T']} disagrees with the built-in"
    peak = {(row["method"], row["T"]): row["peak_tensor_bytes"] for row in rows}
    for T in (256, 512, 1024):
        assert peak[("naive", T)] == 2 * T * T * 4, "naive attention holds the scores and the weights at its peak"
    # chunk 128: the chunked peak grows about linearly in T, the naive one quadratically.
    assert peak[("chunked", 1024)] < 2.5 * peak[("chunked", 512)]
    assert figures["verdict"]["T"] == 1024
    assert figures["verdict"]["naive_over_chunked_peak_memory"] > 4
    assert "at T=1024: chunked peak memory" in run.stdout


def test_fused_attention_benchmark_quick_run_checks_the_kernel(tmp_path: Path) -> None:
    _, figures = run_benchmark("fused_attention.py", "--quick", out=tmp_path / "fused.json")
    assert figures["device"], "every figure records its device"
    rows = figures["rows"]
    assert {row["causal"] for row in rows} == {False, True}
    # Against SDPA in float32: float32 rows (the CPU run) agree to rounding; on a GPU the inputs are float16
    # or bfloat16 (8 and 11 bits of precision), and an output element of attention is an average of values.
    tolerance = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 2e-2}
    for row in rows:
        if row["status"] != "ok":  # a backend that refuses a shape, or naive attention skipped for memory
            continue
        assert row["max_abs_diff_vs_sdpa_fp32"] < tolerance[row["dtype"]], (
            f"{row['method']} ({row['dtype']}, causal={row['causal']}, T={row['T']}) disagrees with SDPA"
        )
    methods = {row["method"] for row in rows}
    if "triton (interpreter)" in methods:  # the CPU run: tiles against naive in memory, and the kernel checked once
        peak = {(row["method"], row["T"], row["causal"]): row["peak_tensor_bytes"] for row in rows}
        assert peak[("pytorch tiles (nb 07)", 512, False)] < peak[("naive", 512, False)] / 3
        assert peak[("naive", 512, False)] == 4 * 2 * 512 * 512 * 4, "naive holds scores and weights for 4 heads"
        # notebook 08: forward + backward through the tiles and through the Triton kernels, gradients checked above
        assert {"fwd+bwd pytorch tiles (nb 07 + nb 08)", "fwd+bwd triton (nb 07 + nb 08)", "fwd+bwd naive"} <= methods
    else:
        assert "triton (notebook 07)" in methods and "fwd+bwd triton (nb 07 + nb 08)" in methods


@pytest.mark.slow
def test_grading_benchmark_runs_in_quick_mode(tmp_path: Path) -> None:
    # Quick mode: the benchmark works and records its figures. The --jobs target itself is
    # for benchmarks/grading.py to print, never for a test: a busy machine must not fail CI.
    # It exits non-zero unless both runs give the same rows.
    _, figures = run_benchmark("grading.py", "parallel", "--submissions", "2", "--jobs", "2", out=tmp_path / "grading.json", timeout=600)
    result = figures["parallel"]
    assert figures["machine"]["device"] == "cpu" and result["submissions"] == 2
    assert result["seconds_jobs_1"] > 0 and result["seconds_jobs_2"] > 0
    assert result["ratio"] == pytest.approx(result["seconds_jobs_2"] / result["seconds_jobs_1"], abs=2e-3)
    for key in ("stages_jobs_1", "stages_jobs_2"):  # every stage reported (how long each took is the benchmark's to print)
        stages = result[key]
        assert set(stages) == set(STAGES) and all(seconds >= 0 for seconds in stages.values()), stages


@pytest.mark.slow
def test_notebook_benchmark_runs_in_quick_mode(tmp_path: Path) -> None:
    # It records the seconds against the 60 s budget; only a failing cell makes it exit non-zero.
    _, figures = run_benchmark("notebooks.py", "--quick", out=tmp_path / "notebooks.json")
    assert figures["budget_s"] == 60 and figures["machine"]["cpus"]
    [row] = figures["rows"]
    assert row["mode"] == "grading" and row["seconds"] > 0 and row["errors"] == []


def test_the_gpu_session_runs_nothing_without_a_gpu(tmp_path: Path, repo_root: Path) -> None:
    # On a GPU machine the script runs the kernels' tests and the sweep; here (CI has no GPU) it must say so
    # and leave nothing behind, so that the one prepared script can be handed to a device machine as it is.
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the session would run for minutes")
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    run = subprocess.run(["bash", str(repo_root / "benchmarks" / "gpu_session.sh")], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "no CUDA GPU here: nothing to run"
    assert not (tmp_path / "out").exists()
