"""Naive, chunked and built-in attention on this CPU: wall time and peak memory against length.

The chunked attention is notebook 06's solution (loaded from solutions/), naive attention
materialises the full score matrix, and the built-in is F.scaled_dot_product_attention
(its fused CPU kernel). For each length T it reports:

- the median wall time (course_utils.timing.median_seconds);
- the peak tensor memory: bytes of tensors alive at once, counted by PyTorch's dispatcher
  (course_utils.memory), inputs excluded — the measure the notebook uses;
- the largest difference from the built-in's output, so a fast wrong answer cannot pass.

Why not the process's resident memory? The allocator keeps freed memory for reuse, so within
one process a measurement depends on what ran before it; and the dispatcher's count is exact
and the same on every machine. It does not see scratch tiles inside the fused built-in kernel.

It checks the course's target at the largest T: chunked attention cuts the peak memory at
least 8x against naive, at no more than 1.5x naive's time.

    .venv/bin/python benchmarks/complexity.py [--quick] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # run from a checkout without installing
os.environ.setdefault("COURSE_SOLUTIONS_DIR", str(REPO_ROOT / "solutions"))  # from any working directory

from baselines import naive_attention  # noqa: E402
from baselines import sdpa_flash as builtin_attention

from autograder.solutions import load_solution  # noqa: E402
from course_utils.memory import peak_tensor_bytes  # noqa: E402
from course_utils.timing import median_seconds  # noqa: E402

MEMORY_TARGET = 8.0  # chunked peak at least 8x below naive at the largest T
TIME_TARGET = 1.5  # chunked no slower than 1.5x naive

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def measure(methods: dict[str, Attention], lengths: list[int], heads: int, d: int, repeats: int) -> list[dict]:
    rows = []
    for T in lengths:
        generator = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(1, heads, T, d, generator=generator) for _ in range(3))
        with torch.no_grad():
            reference = builtin_attention(q, k, v)
        for name, fn in methods.items():
            with torch.no_grad():
                error = (fn(q, k, v) - reference).abs().max().item()
            rows.append(
                {
                    "method": name,
                    "T": T,
                    "seconds": median_seconds(fn, q, k, v, repeats=repeats),
                    "peak_tensor_bytes": peak_tensor_bytes(fn, q, k, v),
                    "max_abs_diff_vs_builtin": error,
                }
            )
            print(_format(rows[-1]), flush=True)
    return rows


def _format(row: dict) -> str:
    return (
        f"{row['method']:<16}{row['T']:>7}{row['seconds'] * 1e3:>12.1f}{row['peak_tensor_bytes'] / 2**20:>14.1f}"
        f"{row['max_abs_diff_vs_builtin']:>12.1e}"
    )


def verdict(rows: list[dict], T: int) -> dict:
    """The course's target at length T: chunked peak memory and time relative to naive."""
    at = {row["method"]: row for row in rows if row["T"] == T}
    memory_ratio = at["naive"]["peak_tensor_bytes"] / at["chunked"]["peak_tensor_bytes"]
    time_ratio = at["chunked"]["seconds"] / at["naive"]["seconds"]
    return {
        "T": T,
        "naive_over_chunked_peak_memory": memory_ratio,
        "chunked_over_naive_time": time_ratio,
        "memory_target_met": memory_ratio >= MEMORY_TARGET,
        "time_target_met": time_ratio <= TIME_TARGET,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI (seconds)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args(argv)

    lengths = [256, 512, 1024] if args.quick else [512, 1024, 2048, 4096, 8192]
    chunk = 128 if args.quick else 512
    repeats = 2 if args.quick else 3
    solution = load_solution("06_complexity")

    def chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return solution.chunked_attention(q, k, v, chunk_size=chunk)

    methods: dict[str, Attention] = {"naive": naive_attention, "chunked": chunked, "builtin": builtin_attention}
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    print(f"B=1, H={args.heads}, d={args.dim}, float32, chunk {chunk}; {machine['cpus']} CPUs, torch {machine['torch']}")
    print(f"{'method':<16}{'T':>7}{'time (ms)':>12}{'tensors MiB':>14}{'max |diff|':>12}")
    rows = measure(methods, lengths, args.heads, args.dim, repeats)
    result = verdict(rows, lengths[-1])
    print(
        f"at T={result['T']}: chunked peak memory {result['naive_over_chunked_peak_memory']:.1f}x below naive "
        f"(target >= {MEMORY_TARGET}x), time {result['chunked_over_naive_time']:.2f}x naive (target <= {TIME_TARGET}x)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"machine": machine, "heads": args.heads, "dim": args.dim, "chunk": chunk, "rows": rows, "verdict": result}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
