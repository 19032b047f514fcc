"""Notebook 07's fused attention against the built-in and naive attention.

On a CUDA GPU: the Triton kernel against SDPA's FlashAttention backend and naive attention,
float16 (or --dtype), B=2, H=16 (32 heads), d=64, T from 1024 to 16384, causal and not:
median time, TFLOP/s (4*B*H*T*T*d FLOPs, half with causal masking, as notebook 06 counts
them), the ratio to the built-in, and the largest difference from SDPA in float32.

On a CPU: the tiled PyTorch FlashAttention (flash_attention_forward, 128x128 tiles) against
naive attention and PyTorch's fused CPU kernel, in time and peak tensor memory. The Triton
kernel only runs in the interpreter there; ``--quick`` checks it on one tiny size.

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

from baselines import naive_attention, sdpa_flash  # noqa: E402

from course_utils.memory import peak_tensor_bytes  # noqa: E402
from course_utils.reference import load_solution  # noqa: E402
from course_utils.timing import median_seconds  # noqa: E402

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def attention_flops(batch: int, heads: int, T: int, d: int, causal: bool) -> float:
    """Notebook 06's count (2 FLOPs per multiply-add in QK^T and PV); causal masking halves the useful work."""
    full = load_solution("06_complexity").attention_flops(batch, heads, T, T, d, d)
    return full / 2 if causal else full


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"CPU ({os.cpu_count()} cores)"


def measure(methods: dict[str, Attention], lengths: list[int], batch: int, heads: int, d: int, dtype: torch.dtype,
            device: str, repeats: int, memory: bool) -> list[dict]:
    rows = []
    generator = torch.Generator().manual_seed(0)
    for causal in (False, True):
        for T in lengths:
            q, k, v = (torch.randn(batch, heads, T, d, generator=generator).to(device, dtype) for _ in range(3))
            with torch.no_grad():
                reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            builtin_seconds = None
            for name, fn in methods.items():
                with torch.no_grad():
                    error = (fn(q, k, v, causal).float() - reference).abs().max().item()
                seconds = median_seconds(fn, q, k, v, causal, repeats=repeats)
                if name.startswith("sdpa"):
                    builtin_seconds = seconds
                row = {"method": name, "causal": causal, "T": T, "seconds": seconds,
                       "tflops": attention_flops(batch, heads, T, d, causal) / seconds / 1e12,
                       "speed_vs_builtin": None if builtin_seconds is None else builtin_seconds / seconds,
                       "peak_tensor_bytes": peak_tensor_bytes(fn, q, k, v, causal) if memory else None,
                       "max_abs_diff_vs_sdpa_fp32": error}
                rows.append(row)
                ratio = "" if row["speed_vs_builtin"] is None else f"{row['speed_vs_builtin']:.2f}"
                mib = "" if row["peak_tensor_bytes"] is None else f"{row['peak_tensor_bytes'] / 2**20:.1f}"
                print(f"{name:<24}{str(causal):>7}{T:>7}{seconds * 1e3:>11.3f}{row['tflops']:>9.3f}{ratio:>12}{mib:>9}{error:>12.1e}",
                      flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds), for CI")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    args = parser.parse_args(argv)

    solution = load_solution("07_fused_attention")

    def triton_kernel(q, k, v, causal):
        return solution.flash_attention_triton(q, k, v, is_causal=causal)[0]  # (O, L): the output

    def pytorch_tiles(q, k, v, causal):
        return solution.flash_attention_forward(q, k, v, is_causal=causal, block_q=128, block_k=128)[0]

    if torch.cuda.is_available():
        device, dtype, (B, H, d) = "cuda", getattr(torch, args.dtype), (2, 16, 64)
        lengths = [1024, 2048] if args.quick else [1024, 2048, 4096, 8192, 16384]
        # the built-in first, so that the others can report their speed relative to it
        methods: dict[str, Attention] = {"sdpa flash": sdpa_flash, "triton (notebook 07)": triton_kernel, "naive": naive_attention}
        repeats, memory = 10, False
    else:
        device, dtype, (B, H, d) = "cpu", torch.float32, (1, 4, 64)
        lengths = [256, 512] if args.quick else [512, 1024, 2048, 4096]
        methods = {"sdpa flash (CPU)": sdpa_flash, "pytorch tiles (nb 07)": pytorch_tiles, "naive": naive_attention}
        repeats, memory = (2 if args.quick else 3), True

    print(f"{device_name()} | torch {torch.__version__} | {dtype} | B={B}, H={H}, d={d}")
    print(f"{'method':<24}{'causal':>7}{'T':>7}{'ms':>11}{'TFLOP/s':>9}{'vs built-in':>12}{'MiB':>9}{'max |diff|':>12}")
    rows = measure(methods, lengths, B, H, d, dtype, device, repeats, memory)
    if device == "cpu" and args.quick:
        # The Triton kernel can only be checked here, in the interpreter, at a tiny size.
        rows += measure({"triton (interpreter)": triton_kernel}, [64], 1, 2, 16, dtype, device, 1, False)
    if args.json:
        args.json.write_text(json.dumps({"device": device_name(), "torch": torch.__version__, "dtype": str(dtype),
                                         "batch": B, "heads": H, "head_dim": d, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
