"""course_utils.emulated_kernels: PyTorch stand-ins for notebook 07's kernels that grade a launcher.

A correct launch computes what the kernel would, through the pointers, strides and grid it was given;
a wrong launch fails with a message that names what is wrong. Stood in through ``call(stand_ins=...)``,
the emulation stays launchable (``operators.shielded`` keeps it subscriptable) and its PyTorch
operators run in the stand-in range.
"""

from __future__ import annotations

import ast
import math
import re

import nbformat
import pytest
import torch
import torch.nn.functional as F

from autograder.settings import SOLUTIONS_DIR
from course_utils import operators
from course_utils.checks import call, nan_padded
from course_utils.emulated_kernels import (
    FLASH_ATTENTION_KERNEL,
    FLASH_ATTENTION_KERNEL_STAND_IN,
    SOFTMAX_ROW_KERNEL,
    SOFTMAX_ROW_KERNEL_STAND_IN,
)
from course_utils.kernels import launch
from course_utils.operators import STAND_IN_RANGE, builtin_kernels_run, shielded

LOG2_E = 1.4426950408889634


def next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def softmax_launch(x: torch.Tensor, out: torch.Tensor | None = None, **changes):
    """The arguments of a correct softmax_row_kernel launch for x, with ``changes`` applied."""
    out = torch.empty(x.shape, dtype=x.dtype) if out is None else out
    args = {
        "X": x,
        "OUT": out,
        "n_cols": x.shape[1],
        "stride_x": x.stride(0),
        "stride_out": out.stride(0),
        "BLOCK": next_power_of_2(x.shape[1]),
    }
    grid = changes.pop("grid", (x.shape[0],))
    args.update(changes)
    return grid, args, out


def attention_launch(Q, K, V, is_causal=False, scale=None, **changes):
    B, H, T_q, d = Q.shape
    O = torch.empty_like(Q)
    L = torch.empty(B, H, T_q, dtype=torch.float32)
    scale = 1 / math.sqrt(d) if scale is None else scale
    args = dict(zip(FLASH_ATTENTION_KERNEL.parameters[:5], (Q, K, V, O, L)))
    for name, tensor in zip("qkvol", (Q, K, V, O, L)):
        args.update({f"stride_{name}{a}": s for a, s in zip("bhtd", tensor.stride())})
    args.update(H=H, T_q=T_q, T_k=K.shape[2], head_dim=d, scale_log2e=scale * LOG2_E, IS_CAUSAL=is_causal)
    args.update(BLOCK_M=16, BLOCK_N=16, BLOCK_D=max(16, next_power_of_2(d)))
    grid = changes.pop("grid", (-(-T_q // 16), B * H))
    args.update(changes)
    return grid, args, O, L


def expected_attention(Q, K, V, is_causal=False, scale=None):
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    s = Q.double() @ K.double().transpose(-2, -1) * scale
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    O = F.scaled_dot_product_attention(Q.float(), K.float(), V.float(), is_causal=is_causal, scale=scale)
    return O, torch.logsumexp(s, dim=-1).float()


# --- the row softmax -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [
        torch.randn(5, 11),
        torch.randn(5, 24)[:, :11],  # row stride 24
        torch.randn(3, 40)[1:, 5:12],  # a storage offset
        torch.randn(4, 9).half(),
        torch.randn(1, 1),
    ],
)
def test_a_correct_softmax_launch_computes_the_softmax_through_the_strides(x: torch.Tensor) -> None:
    grid, args, out = softmax_launch(x)
    SOFTMAX_ROW_KERNEL[grid](**args)
    torch.testing.assert_close(out, torch.softmax(x.float(), dim=-1).to(x.dtype))


def test_the_softmax_emulation_writes_only_through_the_output_pointer() -> None:
    buffer = torch.full((6, 20), 7.0)
    x = torch.randn(6, 11)
    out = buffer[:, 2:13]
    grid, args, _ = softmax_launch(x, out)
    launch(SOFTMAX_ROW_KERNEL, grid, *args.values())  # positionally, through course_utils.kernels.launch
    torch.testing.assert_close(buffer[:, 2:13], torch.softmax(x, dim=-1))
    assert (buffer[:, :2] == 7).all() and (buffer[:, 13:] == 7).all()


def test_a_grid_function_gets_the_launch_arguments_by_name() -> None:
    x = torch.randn(3, 5)
    grid, args, out = softmax_launch(x, grid=lambda meta: (meta["X"].shape[0],))
    SOFTMAX_ROW_KERNEL[grid](**args, num_warps=4)  # launch options are accepted and ignored
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"grid": (3,)}, "the grid has 3 programs on axis 0 but x has 5 rows"),
        ({"grid": (5, 2)}, "uses axis 0 only"),
        ({"grid": (5.0,)}, "a grid counts programs, in ints"),
        ({"BLOCK": 12}, "BLOCK=12 is not a power of two"),
        ({"BLOCK": 8}, "BLOCK=8 is smaller than n_cols=11"),
        ({"stride_x": 11}, "stride_x=11, but the x you launched with has strides [24, 1]"),
        ({"stride_out": 24}, "stride_out=24, but the out you launched with has strides [11, 1]"),
        ({"stride_x": 24.0}, "stride_x=24.0 is a float, where the kernel expects an int"),
        ({"n_cols": 10}, "n_cols=10 but x has 11 columns"),
        ({"OUT": 3}, "OUT must be a tensor"),
    ],
)
def test_a_wrong_softmax_launch_names_what_is_wrong(changes: dict, message: str) -> None:
    x = torch.randn(5, 24)[:, :11]
    grid, args, _ = softmax_launch(x, **changes)
    with pytest.raises(AssertionError, match=re.escape(message)):
        SOFTMAX_ROW_KERNEL[grid](**args)


def test_the_softmax_emulation_wants_contiguous_columns_and_names_the_missing_argument() -> None:
    x = torch.randn(11, 5).t()
    grid, args, _ = softmax_launch(x)
    with pytest.raises(AssertionError, match="reads the columns of a row at unit stride"):
        SOFTMAX_ROW_KERNEL[grid](**args)
    args.pop("BLOCK")
    with pytest.raises(AssertionError, match="missing a required argument: 'BLOCK'"):
        SOFTMAX_ROW_KERNEL[grid](**args)
    with pytest.raises(AssertionError, match="is a kernel: start it with launch"):
        SOFTMAX_ROW_KERNEL(x)


def test_a_launch_past_the_end_of_a_tensor_is_refused_not_read() -> None:
    x = torch.randn(4, 8)
    grid, args, _ = softmax_launch(x, X=torch.randn(30), stride_x=8)  # a 1-D pointer to 30 elements: 4 rows of 8 need 32
    with pytest.raises(AssertionError, match="past the end of its memory"):
        SOFTMAX_ROW_KERNEL[grid](**args)


# --- the attention forward ------------------------------------------------------------------------------------


def attention_inputs(B=2, H=3, T_q=17, T_k=33, d=12, dtype=torch.float32):
    return torch.randn(B, H, T_q, d, dtype=dtype), torch.randn(B, H, T_k, d, dtype=dtype), torch.randn(B, H, T_k, d, dtype=dtype)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "nan_padded", "transposed"])
def test_a_correct_attention_launch_gives_sdpa_and_the_logsumexp(is_causal: bool, layout: str) -> None:
    Q, K, V = attention_inputs()
    views = {
        "contiguous": (Q, K, V),
        "nan_padded": tuple(nan_padded(t, 16, 16) for t in (Q, K, V)),
        "transposed": tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in (Q, K, V)),
    }[layout]
    grid, args, O, L = attention_launch(*views, is_causal=is_causal, scale=0.3)
    FLASH_ATTENTION_KERNEL[grid](**args)
    O_expected, L_expected = expected_attention(Q, K, V, is_causal=is_causal, scale=0.3)
    torch.testing.assert_close(O, O_expected)
    torch.testing.assert_close(L, L_expected)


def test_the_attention_emulation_writes_float16_outputs_in_their_dtype() -> None:
    Q, K, V = attention_inputs(1, 2, 33, 20, 16, dtype=torch.float16)
    grid, args, O, L = attention_launch(Q, K, V)
    FLASH_ATTENTION_KERNEL[grid](**args)
    O_expected, L_expected = expected_attention(Q, K, V)
    assert O.dtype == torch.float16 and L.dtype == torch.float32
    torch.testing.assert_close(O, O_expected.half(), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(L, L_expected)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"grid": (17, 6)}, "the grid has 17 programs on axis 0 but T_q=17 in blocks of BLOCK_M=16 is cdiv(17, 16) = 2"),
        ({"grid": (2, 2)}, "the grid has 2 programs on axis 1 but Q has B * H = 2 * 3 = 6"),
        ({"BLOCK_D": 12}, "BLOCK_D=12 is not a power of two"),
        ({"BLOCK_M": 8}, "BLOCK_M=8: tl.dot needs every block dimension to be at least 16"),
        ({"BLOCK_D": 32, "head_dim": 20}, "head_dim=20, but Q has shape"),
        ({"stride_kb": 17 * 3 * 12, "stride_kh": 17 * 12}, "stride_kb=612, but the K you launched with has strides"),
        ({"stride_qt": 12.0}, "stride_qt=12.0 is a float, where the kernel expects an int"),
        ({"scale_log2e": torch.tensor(0.4)}, "scale_log2e must be a finite number"),
        ({"T_k": 17}, "T_k=17, but K has shape"),
    ],
)
def test_a_wrong_attention_launch_names_what_is_wrong(changes: dict, message: str) -> None:
    grid, args, _, _ = attention_launch(*attention_inputs(), **changes)
    with pytest.raises(AssertionError, match=re.escape(message)):
        FLASH_ATTENTION_KERNEL[grid](**args)


def test_block_d_below_the_head_dimension_is_refused() -> None:
    Q, K, V = attention_inputs(d=40)
    grid, args, _, _ = attention_launch(Q, K, V, BLOCK_D=32)
    with pytest.raises(AssertionError, match="BLOCK_D=32 must be >= head_dim=40"):
        FLASH_ATTENTION_KERNEL[grid](**args)


# --- the emulations match the notebook's kernels --------------------------------------------------------------


def kernel_parameters(notebook: str, kernel: str) -> list[str]:
    cells = nbformat.read(SOLUTIONS_DIR / notebook / f"{notebook}.ipynb", as_version=4).cells
    for cell in cells:
        if cell.cell_type == "code" and f"def {kernel}(" in cell.source:
            tree = ast.parse(cell.source)
            node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel)
            return [a.arg for a in node.args.args]
    raise AssertionError(f"no kernel {kernel} in {notebook}")


@pytest.mark.parametrize("emulation", [SOFTMAX_ROW_KERNEL, FLASH_ATTENTION_KERNEL])
def test_each_emulation_takes_the_notebook_kernels_parameters(emulation) -> None:
    assert list(emulation.parameters) == kernel_parameters("07_fused_attention", emulation.name)


# --- stood in through call(): shielded, and still launched like a kernel --------------------------------------

softmax_row_kernel = None  # the name a launcher below launches; call(stand_ins=...) replaces it
flash_attention_kernel = None


def _softmax_rows_with_launch(x):
    out = torch.empty_like(x)
    launch(softmax_row_kernel, (x.shape[0],), x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK=next_power_of_2(x.shape[1]))
    return out


def _softmax_rows_subscripted(x):
    out = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK=next_power_of_2(x.shape[1]))
    return out


def _attention(Q, K, V):
    grid, args, O, L = attention_launch(Q, K, V)
    launch(flash_attention_kernel, grid, **args)
    return O, L


@pytest.mark.parametrize("launcher", [_softmax_rows_with_launch, _softmax_rows_subscripted])
def test_a_stood_in_emulation_is_launched_like_a_kernel_in_the_stand_in_range(launcher) -> None:
    x = torch.randn(4, 7)
    opened = operators.shields_opened()
    with builtin_kernels_run(("torch.softmax",)) as found:
        out = call(launcher, x, stand_ins=SOFTMAX_ROW_KERNEL_STAND_IN)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))
    assert found == [], "the emulation's softmax ran outside the stand-in range"
    assert operators.shields_opened() == opened + 1, "one launch opens one range"
    assert softmax_row_kernel is None, "the stand-in is gone after the call"


def test_a_wrong_launch_through_call_fails_with_the_emulations_message() -> None:
    def wrong_grid(x):
        out = torch.empty_like(x)
        launch(softmax_row_kernel, (1,), x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK=8)
        return out

    wrong_grid.__globals__["softmax_row_kernel"] = None
    with pytest.raises(AssertionError, match="raised AssertionError: the grid has 1 programs on axis 0 but x has 4 rows"):
        call(wrong_grid, torch.randn(4, 7), stand_ins=SOFTMAX_ROW_KERNEL_STAND_IN)


def test_the_attention_emulation_stands_in_through_call() -> None:
    Q, K, V = attention_inputs(1, 2, 20, 9, 16)
    O, L = call(_attention, Q, K, V, returns=2, stand_ins=FLASH_ATTENTION_KERNEL_STAND_IN)
    O_expected, L_expected = expected_attention(Q, K, V)
    torch.testing.assert_close(O, O_expected)
    torch.testing.assert_close(L, L_expected)


def test_shielded_keeps_a_plain_function_plain_and_counts_each_call() -> None:
    double = shielded(lambda x: 2 * x)
    assert not hasattr(double, "__getitem__")
    opened = operators.shields_opened()
    assert double(3) == 6 and double(4) == 8
    assert operators.shields_opened() == opened + 2


def test_shielded_kernel_runs_its_launch_inside_the_range() -> None:
    from torch.profiler import profile

    class Kernel:
        def __getitem__(self, grid):
            return lambda x: torch.softmax(x, dim=-1) * grid[0]

        def __call__(self, x):
            return torch.softmax(x, dim=-1)

    kernel = shielded(Kernel())
    opened = operators.shields_opened()
    with profile() as trace:
        launched = kernel[(2,)]
        assert operators.shields_opened() == opened, "subscribing opens nothing; the launch does"
        out = launched(torch.zeros(3))
        assert kernel(torch.zeros(3)).shape == (3,)
    torch.testing.assert_close(out, torch.full((3,), 2 / 3))
    assert operators.shields_opened() == opened + 2
    ranges = [(e.time_range.start, e.time_range.end) for e in trace.events() if e.name == STAND_IN_RANGE]
    softmaxes = [e for e in trace.events() if e.name == "aten::softmax"]
    assert len(ranges) == 2 and len(softmaxes) == 2
    assert all(any(lo <= e.time_range.start and e.time_range.end <= hi for lo, hi in ranges) for e in softmaxes)
