"""Notebook 07's Triton kernel against SDPA's FlashAttention backend and naive attention.

On a CUDA GPU: float16 (or --dtype), B=4, H=16, d=64, T from 512 to 8192, causal and not.
Reports the median time and TFLOP/s, counting 4*B*H*T*T*d FLOPs (half with causal
masking, as notebook 06 counts them), and the largest difference from SDPA.

Without a GPU the kernel can only run in Triton's interpreter, which measures nothing
useful; ``--quick`` then runs one tiny size to check that the script works (CI does this).
Record the device with every figure: the JSON holds it.

    .venv/bin/python benchmarks/fused_attention.py [--quick] [--json results.json] [--dtype float16]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported (by the solution)

import torch.nn.functional as F  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # run from a checkout without installing
os.environ.setdefault("COURSE_SOLUTIONS_DIR", str(REPO_ROOT / "solutions"))

from course_utils.reference import load_solution  # noqa: E402
from course_utils.timing import median_seconds  # noqa: E402

from baselines import naive_attention, sdpa_flash  # noqa: E402

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def attention_flops(batch: int, heads: int, T: int, d: int, causal: bool) -> float:
    """Notebook 06's count (2 FLOPs per multiply-add in QK^T and PV); causal masking halves the useful work."""
    full = load_solution("06_complexity").attention_flops(batch, heads, T, T, d, d)
    return full / 2 if causal else full


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"CPU ({os.cpu_count()} cores), Triton interpreter"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small size (the only option without a GPU)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    args = parser.parse_args(argv)

    on_gpu = torch.cuda.is_available()
    if not on_gpu and not args.quick:
        print("No CUDA GPU: the Triton kernel would run in the interpreter, which times nothing useful. "
              "Run on a GPU, or pass --quick to check that the script works.")
        return 2
    dtype = getattr(torch, args.dtype) if on_gpu else torch.float32  # the interpreter computes in float32
    device = "cuda" if on_gpu else "cpu"
    B, H, d = (4, 16, 64) if on_gpu else (1, 2, 16)
    lengths = ([512, 1024] if args.quick else [512, 1024, 2048, 4096, 8192]) if on_gpu else [64]
    repeats = 10 if on_gpu else 1

    solution = load_solution("07_fused_attention")
    methods: dict[str, Attention] = {
        "triton (notebook 07)": lambda q, k, v, c: solution.flash_attention_triton(q, k, v, is_causal=c),
        "sdpa flash": sdpa_flash,
        "naive": naive_attention,
    }
    if not on_gpu:
        del methods["sdpa flash"]  # on a CPU, SDPA's flash backend is the fused CPU kernel: not the comparison we want

    print(f"{device_name()} | torch {torch.__version__} | {dtype} | B={B}, H={H}, d={d}")
    print(f"{'method':<22}{'causal':>7}{'T':>7}{'ms':>10}{'TFLOP/s':>10}{'max |diff|':>12}")
    rows = []
    generator = torch.Generator().manual_seed(0)
    for causal in (False, True):
        for T in lengths:
            q, k, v = (torch.randn(B, H, T, d, generator=generator).to(device, dtype) for _ in range(3))
            with torch.no_grad():
                reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            for name, fn in methods.items():
                with torch.no_grad():
                    error = (fn(q, k, v, causal).float() - reference).abs().max().item()
                seconds = median_seconds(fn, q, k, v, causal, repeats=repeats)
                row = {"method": name, "causal": causal, "T": T, "seconds": seconds,
                       "tflops": attention_flops(B, H, T, d, causal) / seconds / 1e12, "max_abs_diff_vs_sdpa_fp32": error}
                rows.append(row)
                print(f"{name:<22}{str(causal):>7}{T:>7}{seconds * 1e3:>10.3f}{row['tflops']:>10.2f}{error:>12.1e}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": device_name(), "torch": torch.__version__, "dtype": str(dtype),
                                         "batch": B, "heads": H, "head_dim": d, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
