"""Notebooks 07 and 08: the fused attention kernels, forward and backward, against the built-in and naive attention.

On a CUDA GPU (forward pass only), for each dtype (float16, bfloat16), head dim d (64, 128),
causal and not, and T in 1024 ... 16384, with B = 16384 // T sequences and H = 16 heads, so that
B*T = 16384 tokens and the work per launch grows only with T (the FlashAttention papers' setup):

    sdpa flash            F.scaled_dot_product_attention, FlashAttention backend only
    sdpa cudnn            the same, cuDNN backend only (a row says "unavailable", and why, where it refuses)
    triton (notebook 07)  the notebook's simple Triton kernel (solution.flash_attention_triton)
    triton fast           the autotuned FlashAttention-2 kernel (solution.flash_attention_fast, section 6)
    torch.compile naive   naive attention through torch.compile, default settings (skipped where naive is)
    naive                 softmax(QK^T/sqrt(d))V with the T x T scores in memory (skipped where the scores
                          and weights, 2*B*H*T*T elements, would take more than 8 GiB)

Each row: the median time from triton.testing.do_bench after a warm-up call (which also pays the
compile and autotune, recorded as first_call_seconds), TFLOP/s (4*B*H*T*T*d FLOPs, half with
causal masking, as notebook 06 counts them), speed_vs_sdpa_flash (flash time / this time: above 1
is faster than flash), and the largest |difference| from SDPA in float32, a sanity check.
Forward + backward rows (notebook 08): SDPA's flash and cuDNN backends through autograd, notebook 07's
Triton forward (simple and fast) followed by notebook 08's Triton backward, the fast forward followed by 08's
fast backward (the solution's showcase, flash_attention_backward_fast), and on a CPU the PyTorch tiles of 07 and 08; TFLOP/s from 3.5 times the forward's count
(2 matrix products forward, 5 backward), and the largest gradient error against SDPA's autograd in float32.
Every GPU row also has speed_vs_sdpa_cudnn (cuDNN's time / this time) where cuDNN ran on that shape.

On a CPU: the tiled PyTorch FlashAttention (flash_attention_forward, 128x128 tiles) against naive
attention and PyTorch's fused CPU kernel, in time and peak tensor memory. The Triton kernels only
run in the interpreter there; ``--quick`` checks both on one tiny size.

Nothing here asserts a time: it prints and records. Record the device with every figure: the
JSON holds it, with the torch, triton, CUDA and cuDNN versions. On a GPU the JSON is rewritten
after every shape ("complete": false until the end), so a run cut short keeps what it measured.
A sweep of all four (dtype, d) groups takes about 4-5 minutes on an H100; --methods flash fast
takes about 2 (both measured before the fast backward rows, whose autotuning and compiles add to the first
call of each shape; see gpu_session.sh).

    python benchmarks/fused_attention.py [--quick] [--json results.json]
        [--dtype float16 bfloat16] [--d 64 128] [--lengths 1024 4096] [--causal both|yes|no]
        [--methods flash cudnn triton fast compiled naive]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported (by the solution)

import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # run from a checkout without installing
os.environ.setdefault("COURSE_SOLUTIONS_DIR", str(REPO_ROOT / "solutions"))

from baselines import naive_attention, sdpa_flash

from autograder.solutions import load_solution
from course_utils.autograd_refs import sdpa_gradients
from course_utils.memory import peak_tensor_bytes
from course_utils.timing import median_seconds

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]

TOKENS = 16384  # B * T on the GPU: B = TOKENS // T sequences of length T
HEADS = 16
NAIVE_LIMIT_BYTES = 8 * 2**30  # naive attention holds the scores and the weights (2 B H T^2 elements) at its peak
METHOD_KEYS = {
    "flash": "sdpa flash",
    "cudnn": "sdpa cudnn",
    "triton": "triton (notebook 07)",
    "fast": "triton fast",
    "compiled": "torch.compile naive",
    "naive": "naive",
}


def attention_flops(batch: int, heads: int, T: int, d: int, causal: bool) -> float:
    """Notebook 06's count (2 FLOPs per multiply-add in QK^T and PV); causal masking halves the useful work."""
    full = load_solution("06_complexity").attention_flops(batch, heads, T, T, d, d)
    return full / 2 if causal else full


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"CPU ({os.cpu_count()} cores)"


def software() -> dict:
    return {
        "device": device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "python": platform.python_version(),
    }


def kernels(solution) -> tuple[Attention, Attention, Attention]:
    """(notebook 07's simple Triton kernel, the fast one, the tiled PyTorch version), as fn(q, k, v, causal) -> O."""

    def triton_kernel(q, k, v, causal):
        return solution.flash_attention_triton(q, k, v, is_causal=causal)[0]  # (O, L): the output

    def fast_kernel(q, k, v, causal):
        return solution.flash_attention_fast(q, k, v, is_causal=causal)[0]  # the solution's showcase (section 6)

    def pytorch_tiles(q, k, v, causal):
        return solution.flash_attention_forward(q, k, v, is_causal=causal, block_q=128, block_k=128)[0]

    return triton_kernel, fast_kernel, pytorch_tiles


# ----------------------------------------------------------------------------------------------
# CPU: the tiles in PyTorch against naive and the fused CPU kernel (time and memory)
# ----------------------------------------------------------------------------------------------


def case(dtype: torch.dtype | str, d: int, batch: int, heads: int, causal: bool, T: int) -> dict:
    """The fields that say which case a result row measured: the same keys in every row."""
    return {"dtype": str(dtype).removeprefix("torch."), "head_dim": d, "batch": batch, "heads": heads, "causal": causal, "T": T}


def measure_cpu(
    methods: dict[str, Attention], lengths: list[int], batch: int, heads: int, d: int, dtype: torch.dtype, repeats: int, memory: bool
) -> list[dict]:
    rows = []
    generator = torch.Generator().manual_seed(0)
    for causal in (False, True):
        for T in lengths:
            q, k, v = (torch.randn(batch, heads, T, d, generator=generator).to(dtype) for _ in range(3))
            with torch.no_grad():
                reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            builtin_seconds = None
            for name, fn in methods.items():
                with torch.no_grad():
                    error = (fn(q, k, v, causal).float() - reference).abs().max().item()
                seconds = median_seconds(fn, q, k, v, causal, repeats=repeats)
                if name.startswith("sdpa"):
                    builtin_seconds = seconds
                row = {
                    "method": name,
                    "status": "ok",
                    **case(dtype, d, batch, heads, causal, T),
                    "seconds": seconds,
                    "ms": seconds * 1e3,
                    "tflops": attention_flops(batch, heads, T, d, causal) / seconds / 1e12,
                    "speed_vs_sdpa_flash": None if builtin_seconds is None else builtin_seconds / seconds,
                    "peak_tensor_bytes": peak_tensor_bytes(fn, q, k, v, causal) if memory else None,
                    "max_abs_diff_vs_sdpa_fp32": error,
                }
                rows.append(row)
                ratio = "" if row["speed_vs_sdpa_flash"] is None else f"{row['speed_vs_sdpa_flash']:.2f}"
                mib = "" if row["peak_tensor_bytes"] is None else f"{row['peak_tensor_bytes'] / 2**20:.1f}"
                print(
                    f"{name:<26}{causal!s:>7}{T:>7}{seconds * 1e3:>11.3f}{row['tflops']:>9.3f}{ratio:>10}{mib:>9}{error:>12.1e}", flush=True
                )
    return rows


def run_cpu(args, solution) -> dict:
    triton_kernel, fast_kernel, pytorch_tiles = kernels(solution)
    dtype, (B, H, d) = torch.float32, (1, 4, 64)
    lengths = [256, 512] if args.quick else [512, 1024, 2048, 4096]
    methods = {"sdpa flash (CPU)": sdpa_flash, "pytorch tiles (nb 07)": pytorch_tiles, "naive": naive_attention}
    repeats = 2 if args.quick else 3
    print(f"{device_name()} | torch {torch.__version__} | {dtype} | B={B}, H={H}, d={d}")
    print(f"{'method':<26}{'causal':>7}{'T':>7}{'ms':>11}{'TFLOP/s':>9}{'vs flash':>10}{'MiB':>9}{'max |diff|':>12}")
    rows = measure_cpu(methods, lengths, B, H, d, dtype, repeats, memory=True)
    if args.quick:
        # The Triton kernels can only be checked here, in the interpreter, at a tiny size (no timing worth the name).
        rows += measure_cpu(
            {"triton (interpreter)": triton_kernel, "triton fast (interpreter)": fast_kernel}, [64], 1, 2, 16, dtype, 1, memory=False
        )
    print(BACKWARD_HEADER)
    solution08 = load_solution("08_flash_backward")
    backward = backward_methods(solution, solution08, ["fwd+bwd sdpa flash", "fwd+bwd pytorch tiles (nb 07 + nb 08)", "fwd+bwd naive"])
    rows += measure_backward(backward, lengths[:2], B, H, d, dtype, "cpu", lambda thunk: median_seconds(thunk, repeats=repeats))
    if args.quick:  # notebook 08's Triton kernels, checked once in the interpreter (no timing worth the name)
        triton_backward = backward_methods(solution, solution08, ["fwd+bwd sdpa flash", "fwd+bwd triton (nb 07 + nb 08)", FAST_BOTH_WAYS])
        rows += measure_backward(triton_backward, [64], 1, 2, 16, dtype, "cpu", lambda thunk: median_seconds(thunk, repeats=1))
    return {**software(), "mode": "cpu", "dtype": str(dtype), "batch": B, "heads": H, "head_dim": d, "rows": rows}


# ----------------------------------------------------------------------------------------------
# GPU: forward-pass speed against SDPA's flash and cuDNN backends
# ----------------------------------------------------------------------------------------------


def sdpa_cudnn(q, k, v, causal=False):
    """PyTorch's cuDNN attention backend; fails (with the reasons as warnings) rather than fall back."""
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def compiled_naive() -> Attention:
    """torch.compile's defaults, as a user gets them (static shapes first, dynamic after a shape changes)."""
    torch.compiler.config.recompile_limit = 256  # one graph per shape and mask: do not fall back to eager
    return torch.compile(naive_attention)


def short_reason(error: BaseException, caught: list) -> str:
    lines = [f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"]
    lines += [str(w.message).strip().splitlines()[0] for w in caught][:6]  # SDPA's warnings say why a backend refused
    return " | ".join(lines)[:600]


def measure_gpu_one(
    name: str,
    fn: Attention,
    q,
    k,
    v,
    causal: bool,
    reference: torch.Tensor,
    flops: float,
    flash_ms: float | None,
    cudnn_ms: float | None = None,
) -> dict:
    """One row: warm-up call (compile, autotune), error vs the float32 reference, median time."""
    row = {
        "method": name,
        "status": "ok",
        "reason": None,
        "seconds": None,
        "ms": None,
        "tflops": None,
        "speed_vs_sdpa_flash": None,
        "speed_vs_sdpa_cudnn": None,
        "max_abs_diff_vs_sdpa_fp32": None,
        "first_call_seconds": None,
        "peak_tensor_bytes": None,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.no_grad():
                torch.cuda.synchronize()
                started = time.perf_counter()
                out = fn(q, k, v, causal)
                torch.cuda.synchronize()
                row["first_call_seconds"] = time.perf_counter() - started
                row["max_abs_diff_vs_sdpa_fp32"] = (out.float() - reference).abs().max().item()
                del out
                ms = triton.testing.do_bench(lambda: fn(q, k, v, causal), warmup=25, rep=100, return_mode="median")
        except Exception as error:  # noqa: BLE001  (a backend that refuses a shape is a result, not a crash)
            row["status"] = "unavailable" if name.startswith("sdpa") else "error"
            row["reason"] = short_reason(error, caught)
            torch.cuda.empty_cache()
            return row
    row.update(
        seconds=ms / 1e3,
        ms=ms,
        tflops=flops / (ms / 1e3) / 1e12,
        speed_vs_sdpa_flash=None if flash_ms is None else flash_ms / ms,
        speed_vs_sdpa_cudnn=None if cudnn_ms is None else cudnn_ms / ms,
    )
    return row


def run_gpu(args, solution) -> dict:
    triton_kernel, fast_kernel, _ = kernels(solution)
    all_methods: dict[str, Attention] = {
        "sdpa flash": sdpa_flash,
        "sdpa cudnn": sdpa_cudnn,
        "triton (notebook 07)": triton_kernel,
        "triton fast": fast_kernel,
        "torch.compile naive": None,
        "naive": naive_attention,
    }
    wanted = {METHOD_KEYS[m] for m in args.methods} | {"sdpa flash"}  # flash always: every ratio is to it
    if "torch.compile naive" in wanted:
        all_methods["torch.compile naive"] = compiled_naive()
    methods = {name: fn for name, fn in all_methods.items() if name in wanted}
    dtypes = args.dtype or (["float16"] if args.quick else ["float16", "bfloat16"])
    dims = args.d or ([64] if args.quick else [64, 128])
    lengths = args.lengths or ([1024, 2048] if args.quick else [1024, 2048, 4096, 8192, 16384])
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    info = software()
    print(f"{info['device']} | torch {info['torch']} | triton {info['triton']} | CUDA {info['cuda']} | cuDNN {info['cudnn']}")
    print(f"B = {TOKENS} // T, H = {HEADS}; forward only; times are medians of triton.testing.do_bench")
    header = (
        f"{'dtype':<9}{'d':>4}{'causal':>7}{'T':>7}{'B':>4}  {'method':<22}{'ms':>9}{'TFLOP/s':>9}{'vs flash':>9}{'max|diff|':>10}  note"
    )
    # Forward + backward (notebook 08) right after each (dtype, d)'s forward rows, so that a run cut short has both
    # for the groups it reached: each shape once, B*T = TOKENS as in the forward rows.
    solution08 = load_solution("08_flash_backward")
    backward = backward_methods(
        solution,
        solution08,
        ["fwd+bwd sdpa flash", "fwd+bwd sdpa cudnn", "fwd+bwd triton (nb 07 + nb 08)", "fwd+bwd triton fast + nb 08", FAST_BOTH_WAYS],
    )
    fast_kernels = {  # the autotuned kernels behind a row: the tiles they chose go into it
        "fwd+bwd triton fast + nb 08": [solution.fast_attention_kernel],
        FAST_BOTH_WAYS: [
            solution.fast_attention_kernel,
            *(getattr(solution08, k) for k in ("fast_dq_kernel", "fast_dkdv_kernel") if hasattr(solution08, k)),
        ],
    }
    tiles_of = lambda name: {"autotuned": autotuned(*fast_kernels[name])} if name in fast_kernels else {}  # noqa: E731
    gpu_time = lambda thunk: triton.testing.do_bench(thunk, warmup=25, rep=100, return_mode="median") / 1e3  # noqa: E731
    rows = []
    generator = torch.Generator(device="cuda").manual_seed(0)
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for d in dims:
            print(header, flush=True)
            for causal in causals:
                for T in lengths:
                    B, H = max(1, round(TOKENS / T)), HEADS
                    q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=dtype, generator=generator) for _ in range(3))
                    with torch.no_grad():
                        reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                    flops = attention_flops(B, H, T, d, causal)
                    naive_bytes = 2 * B * H * T * T * q.element_size()
                    flash_ms = cudnn_ms = None
                    for name, fn in methods.items():
                        common = case(dtype_name, d, B, H, causal, T)
                        if name in ("naive", "torch.compile naive") and naive_bytes > NAIVE_LIMIT_BYTES:
                            row = {
                                "method": name,
                                "status": "skipped",
                                "seconds": None,
                                "ms": None,
                                "tflops": None,
                                "speed_vs_sdpa_flash": None,
                                "speed_vs_sdpa_cudnn": None,
                                "max_abs_diff_vs_sdpa_fp32": None,
                                "peak_tensor_bytes": None,
                                "reason": f"scores + weights would take {naive_bytes / 2**30:.0f} GiB (> {NAIVE_LIMIT_BYTES / 2**30:.0f} GiB)",
                            }
                        else:
                            row = measure_gpu_one(name, fn, q, k, v, causal, reference, flops, flash_ms, cudnn_ms)
                            if name == "triton fast" and row["status"] == "ok":
                                row["autotuned"] = autotuned(solution.fast_attention_kernel)
                        row = {**common, **row}
                        if name == "sdpa flash" and row["ms"] is not None:
                            flash_ms = row["ms"]
                        if name == "sdpa cudnn" and row["ms"] is not None:
                            cudnn_ms = row["ms"]
                        rows.append(row)
                        print(
                            f"{dtype_name:<9}{d:>4}{causal!s:>7}{T:>7}{B:>4}  {name:<22}{fmt(row['ms'], '.3f'):>9}"
                            f"{fmt(row['tflops'], '.1f'):>9}{fmt(row['speed_vs_sdpa_flash'], '.2f'):>9}"
                            f"{fmt(row['max_abs_diff_vs_sdpa_fp32'], '.1e'):>10}  {row['status'] if row['status'] != 'ok' else ''}"
                            f"{(': ' + row['reason'][:100]) if row.get('reason') else ''}",
                            flush=True,
                        )
                    del q, k, v, reference
                    torch.cuda.empty_cache()
                    if args.json:  # after every shape, so that a run cut short keeps what it measured
                        write_json(args.json, {**info, "mode": "gpu", "complete": False, "rows": rows})
            print(BACKWARD_HEADER)
            for T in lengths:
                B = max(1, round(TOKENS / T))
                rows += measure_backward(backward, [T], B, HEADS, d, dtype, "cuda", gpu_time, causals, annotate=tiles_of)
                if args.json:
                    write_json(args.json, {**info, "mode": "gpu", "complete": False, "rows": rows})

    print("\nthe fast kernels' speed against SDPA flash and cuDNN (above 1: faster), forward, then forward + backward:")
    for method in ("triton fast", FAST_BOTH_WAYS):
        for r in rows:
            if r["method"] == method:
                print(
                    f"  {method:<40} {r['dtype']:<9} d={r['head_dim']:<4} causal={r['causal']!s:<6} T={r['T']:<6} "
                    f"{fmt(r['ms'], '.3f'):>8} ms  vs flash {fmt(r['speed_vs_sdpa_flash'], '.2f'):>5}  "
                    f"vs cuDNN {fmt(r['speed_vs_sdpa_cudnn'], '.2f'):>5}  {r['status'] if r['status'] != 'ok' else ''}"
                )
    return {
        **info,
        "mode": "gpu",
        "complete": True,
        "tokens_per_launch": TOKENS,
        "heads": HEADS,
        "batch_rule": "B = round(16384 / T), H = 16",
        "timing": "triton.testing.do_bench(warmup=25, rep=100, return_mode='median'), after one warm-up call",
        "flops": "4*B*H*T*T*d, halved when causal (notebook 06); forward + backward rows: 3.5 times that (2 + 5 matrix products)",
        "rows": rows,
    }


# ----------------------------------------------------------------------------------------------
# Backward: notebook 08's tiles and kernels, forward + backward together (what a training step pays)
# ----------------------------------------------------------------------------------------------

Gradients = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, bool], tuple[torch.Tensor, ...]]


def training_step_flops(batch: int, heads: int, T: int, d: int, causal: bool) -> float:
    """Forward plus backward matrix FLOPs: 2 products forward, 5 backward (P recomputed), 3.5x the forward's."""
    return 3.5 * attention_flops(batch, heads, T, d, causal)


def autotuned(*kernels: Any) -> dict[str, list[int] | None]:
    """The tile each autotuned kernel chose at its last launch: {name: [BLOCK_M, BLOCK_N, num_warps, num_stages]}."""
    chosen = {}
    for kernel in kernels:
        config = getattr(kernel, "best_config", None)
        name = getattr(getattr(kernel, "base_fn", None), "__name__", type(kernel).__name__)
        tile = None if config is None else [config.kwargs.get("BLOCK_M"), config.kwargs.get("BLOCK_N"), config.num_warps, config.num_stages]
        chosen[name] = tile
    return chosen


def fmt(x: float | None, spec: str) -> str:
    """A table cell: the number in ``spec``'s format, or blank for a figure not measured."""
    return "" if x is None else format(x, spec)


def autograd_of(forward: Attention) -> Gradients:
    """(dQ, dK, dV) of sum(forward(q, k, v) * dO), through PyTorch's autograd."""

    def step(q, k, v, dO, causal):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        with torch.enable_grad():
            return torch.autograd.grad(forward(*leaves, causal), leaves, dO)

    return step


def backward_methods(solution07, solution08, names: list[str]) -> dict[str, Gradients]:
    """Forward + backward for each named method, as fn(q, k, v, dO, causal) -> (dQ, dK, dV)."""

    def tiles(q, k, v, dO, causal):  # notebook 07's tiled forward, notebook 08's tiled backward
        O, L = solution07.flash_attention_forward(q, k, v, is_causal=causal, block_q=128, block_k=128)
        return solution08.flash_attention_backward(q, k, v, O, dO, L, is_causal=causal, block_q=128, block_k=128)

    def kernels_after(forward, backward=solution08.flash_attention_backward_triton):
        def step(q, k, v, dO, causal):  # a Triton forward that returns (O, L), then a Triton backward (08's by default)
            O, L = forward(q, k, v, is_causal=causal)
            return backward(q, k, v, O, dO, L, is_causal=causal)

        return step

    every = {
        "fwd+bwd sdpa flash": lambda: autograd_of(sdpa_flash),
        "fwd+bwd sdpa cudnn": lambda: autograd_of(sdpa_cudnn),
        "fwd+bwd pytorch tiles (nb 07 + nb 08)": lambda: tiles,
        "fwd+bwd triton (nb 07 + nb 08)": lambda: kernels_after(solution07.flash_attention_triton),
        "fwd+bwd triton fast + nb 08": lambda: kernels_after(solution07.flash_attention_fast),
        FAST_BOTH_WAYS: lambda: kernels_after(solution07.flash_attention_fast, solution08.flash_attention_backward_fast),
        "fwd+bwd naive": lambda: autograd_of(naive_attention),
    }
    return {name: every[name]() for name in names}


FAST_BOTH_WAYS = "fwd+bwd triton fast + nb 08 fast"  # 07's fast forward, then 08's fast backward (its showcase)

BACKWARD_HEADER = (
    f"\n{'dtype':<9}{'d':>4}  {'forward + backward':<38}{'causal':>7}{'T':>7}{'ms':>11}{'TFLOP/s':>9}{'vs flash':>10}{'max |diff|':>12}"
)


def measure_backward(
    methods: dict[str, Gradients],
    lengths: list[int],
    batch: int,
    heads: int,
    d: int,
    dtype: torch.dtype,
    device: str,
    time_it: Callable[[Callable[[], Any]], float],
    causals: tuple[bool, ...] | list[bool] = (False, True),
    annotate: Callable[[str], dict] | None = None,
) -> list[dict]:
    """One row per method, masking and length: time of forward + backward, TFLOP/s, largest gradient error vs SDPA in float32.

    ``annotate(method)``, called right after a method's timing, adds fields to its row (the tiles its kernels chose).
    """
    rows = []
    generator = torch.Generator(device=device).manual_seed(0)
    for causal in causals:
        for T in lengths:
            q, k, v, dO = (torch.randn(batch, heads, T, d, device=device, dtype=dtype, generator=generator) for _ in range(4))
            reference = sdpa_gradients(q.float(), k.float(), v.float(), dO.float(), is_causal=causal)
            flops = training_step_flops(batch, heads, T, d, causal)
            flash_seconds = cudnn_seconds = None
            for name, fn in methods.items():
                row = {
                    "method": name,
                    "status": "ok",
                    "reason": None,
                    "pass": "forward+backward",
                    **case(dtype, d, batch, heads, causal, T),
                    "peak_tensor_bytes": None,
                }
                try:
                    grads = fn(q, k, v, dO, causal)
                    error = max((g.float() - r).abs().max().item() for g, r in zip(grads, reference))
                    seconds = time_it(lambda: fn(q, k, v, dO, causal))
                except Exception as failure:  # noqa: BLE001  (a backend that refuses a shape is a result)
                    row.update(
                        status="unavailable",
                        reason=f"{type(failure).__name__}: {str(failure)[:200]}",
                        seconds=None,
                        ms=None,
                        tflops=None,
                        speed_vs_sdpa_flash=None,
                        speed_vs_sdpa_cudnn=None,
                        max_abs_diff_vs_sdpa_fp32=None,
                    )
                    rows.append(row)
                    print(
                        f"{str(dtype).removeprefix('torch.'):<9}{d:>4}  {name:<38}{causal!s:>7}{T:>7}  unavailable: {row['reason'][:80]}",
                        flush=True,
                    )
                    continue
                if name == "fwd+bwd sdpa flash":
                    flash_seconds = seconds
                if name == "fwd+bwd sdpa cudnn":
                    cudnn_seconds = seconds
                row.update(
                    seconds=seconds,
                    ms=seconds * 1e3,
                    tflops=flops / seconds / 1e12,
                    speed_vs_sdpa_flash=None if flash_seconds is None else flash_seconds / seconds,
                    speed_vs_sdpa_cudnn=None if cudnn_seconds is None else cudnn_seconds / seconds,
                    max_abs_diff_vs_sdpa_fp32=error,
                    **(annotate(name) if annotate else {}),
                )
                rows.append(row)
                ratio = "" if row["speed_vs_sdpa_flash"] is None else f"{row['speed_vs_sdpa_flash']:.2f}"
                print(
                    f"{str(dtype).removeprefix('torch.'):<9}{d:>4}  {name:<38}{causal!s:>7}{T:>7}{seconds * 1e3:>11.3f}"
                    f"{row['tflops']:>9.3f}{ratio:>10}{error:>12.1e}",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds on a CPU), for CI")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--dtype", nargs="+", choices=["float16", "bfloat16", "float32"], help="GPU only (default float16 bfloat16)")
    parser.add_argument("--d", nargs="+", type=int, help="head dims, GPU only (default 64 128)")
    parser.add_argument("--lengths", nargs="+", type=int, help="sequence lengths T, GPU only (default 1024 ... 16384)")
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both", help="GPU only")
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=list(METHOD_KEYS),
        default=list(METHOD_KEYS),
        help="GPU only; sdpa flash always runs, as the yardstick",
    )
    args = parser.parse_args(argv)

    solution = load_solution("07_fused_attention")
    figures = run_gpu(args, solution) if torch.cuda.is_available() else run_cpu(args, solution)
    if args.json:
        write_json(args.json, figures)
    return 0


def write_json(path: Path, figures: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
