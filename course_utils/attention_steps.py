"""Ladders of inputs for attention's forward pass and the online softmax, for ``kernel_steps.where_steps_differ``.

A fused attention forward (a Triton kernel, PyTorch tiles) can go wrong in one tile's softmax, in the running
statistics carried from one key tile to the next, in the masks of a ragged last tile, in a head dimension that is
not a power of two, in the scale, or in the causal mask inside and across tiles. ``forward_ladder`` builds one
input per step, simplest first, so that the first rung whose result differs from ``attention_reference``'s
names the step (differential evidence, never a guessed cause)::

    located = where_steps_differ(flash_attention_triton, attention_reference, forward_ladder(tiled=False))
    assert check_close(O, expected, label=..., hint=located or "what was compared")

Every input is small, seeded (no draw from the global random state) and sits in a NaN-padded buffer
(``inputs.nan_padded``): a load past the end of a tensor reads NaN, which then shows in the result. A row of
scores all far below zero (-150) is among them: a running max started at 0 instead of -inf underflows there to
0 / 0. ``softmax_ladder`` does the same for a row-wise online softmax, against ``softmax_reference``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .comparisons import Tolerance, _recording, attention_rounding, exp_rounding
from .inputs import nan_padded, random_tensor
from .kernel_steps import Step

# Past the end of every tensor: more than a tile of up to 128 rows, and the head dimension's padding to 16 or more.
PAD_ROWS, PAD_COLUMNS = 128, 16
EXTREME = 150.0  # |score| of the extreme rows: exp(-150) is 0 in float32, exp(150) is inf
TF32_EPS = 2.0**-10  # a GPU's float32 tl.dot rounds its inputs to TF32


def attention_reference(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool = False, scale: float | None = None, **tiles: Any
) -> dict[str, torch.Tensor]:
    """What a forward pass must return on a rung: PyTorch's attention and the logsumexp of the scaled scores.

    Args:
        Q: [..., T_q, d], K: [..., T_k, d], V: [..., T_k, d_v]. is_causal: top-left, as
            F.scaled_dot_product_attention. scale: 1/sqrt(d) when None. tiles: block_q, block_k, ... (ignored).

    Returns:
        {"O": [..., T_q, d_v] in Q's dtype, "L": [..., T_q] float32}, both computed in float64.
    """
    Qd, Kd, Vd = Q.double(), K.double(), V.double()
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    scores = Qd @ Kd.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool, device=Q.device).triu(1), float("-inf"))
    O = F.scaled_dot_product_attention(Qd, Kd, Vd, is_causal=is_causal, scale=scale)
    return {"O": O.to(Q.dtype), "L": torch.logsumexp(scores, dim=-1).float()}


def attention_output_reference(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool = False, scale: float | None = None, **tiles: Any
) -> dict[str, torch.Tensor]:
    """``attention_reference`` for a function that returns O alone (a drop-in attention): {"O": ...}."""
    return {"O": attention_reference(Q, K, V, is_causal, scale)["O"]}


def forward_ladder(*, tiled: bool, causal: bool = False, device: str | torch.device = "cpu") -> list[Step]:
    """The rungs of a forward pass f(Q, K, V, is_causal=..., scale=...) -> (O, L), simplest first (at most 8).

    Args:
        tiled: True for a function that takes its tiles as ``block_q=`` and ``block_k=`` (notebook 07's
            flash_attention_forward): each rung passes its own, a few rows each, and V's head dimension
            may differ from Q's. False for one that picks its own tiles (a Triton launcher, a drop-in
            attention): lengths give one tile, or several, for any tile of 16 to 128 rows.
        causal: the causal test's ladder: one tile and the extreme rows, then the diagonal tile alone, several
            causal tiles (for a kernel, several for any tile of up to 64), and T_q < T_k and T_q > T_k (top-left).
            Else the non-causal one: one tile, the extreme rows, several key tiles, ragged tiles, the (batch,
            head) offsets and strides, d not a power of two, scale = 1.0 and scale = 0.3.
        device: where the inputs live ("cuda" for a kernel compiled for a GPU, whose float32 products round
            through TF32: the extreme rows' rounding is widened to match).

    Returns:
        [Step], each with args (Q, K, V) and kwargs (is_causal, scale when given, block_q and block_k when tiled).
    """
    steps = [_one_tile(tiled, device), _extreme_rows(tiled, device)]
    if causal:  # short: a kernel whose grid is too large runs every rung's extra programs in the interpreter
        return steps + _causal_steps(tiled, device)
    return steps + [_several_key_tiles(tiled, device), _ragged(tiled, device), *_options(tiled, device)]


def _inputs(
    T_q: int, T_k: int, d: int, d_v: int, seed: int, device: str | torch.device, *, heads: tuple[int, int] = (1, 1)
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q, K, V of the given sizes, seeded, each a view into a NaN-padded buffer."""
    Q, K, V = (random_tensor(*heads, T, width, seed=seed + i) for i, (T, width) in enumerate(((T_q, d), (T_k, d), (T_k, d_v))))
    return _padded(Q, K, V, device)


def _padded(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, device: str | torch.device) -> tuple[torch.Tensor, ...]:
    return tuple(nan_padded(t.to(device), PAD_ROWS, PAD_COLUMNS) for t in (Q, K, V))


def _step(
    step: str, inputs: str, QKV: tuple[torch.Tensor, ...], tiles: tuple[int, int] | None, rounding: Tolerance | None = None, **options: Any
) -> Step:
    kwargs = {**options, **({"block_q": tiles[0], "block_k": tiles[1]} if tiles else {})}
    return Step(step, inputs + (f", tiles of {tiles[0]} queries by {tiles[1]} keys" if tiles else ""), QKV, kwargs, rounding)


def _one_tile(tiled: bool, device: str | torch.device) -> Step:
    T = 8 if tiled else 16
    return _step(
        "the scores, softmax and output of a single tile",
        f"T_q = T_k = {T}, d = {T}" + ("" if tiled else " (one tile of queries and one of keys for any tile of 16 or more)"),
        _inputs(T, T, T, T, 700, device),
        (T, T) if tiled else None,
        is_causal=False,
    )


def _extreme_rows(tiled: bool, device: str | torch.device) -> Step:
    """One tile whose query 0 scores every key near -150, query 1 every key 0, query 2 every key near +150."""
    T = 8 if tiled else 16
    Q, K, V = (random_tensor(1, 1, T, T, seed=710 + i) for i in range(3))
    K[..., 0] = 4.0  # every key's first component: a query along it shifts all its scores alike
    Q[..., 0, :], Q[..., 1, :] = Q[..., 0, :] / 4, 0.0
    Q[..., 0, 0], Q[..., 2, 0] = -EXTREME * math.sqrt(T) / 4, EXTREME * math.sqrt(T) / 4  # scores -150 and +150, give or take 1
    rounding = attention_rounding(Q, K, V)
    if torch.device(device).type == "cuda":  # TF32 products: scores near 150 round by about 0.1
        widen = TF32_EPS / torch.finfo(torch.float32).eps
        rounding = Tolerance(rounding.rtol * widen, rounding.atol * widen)
    return _step(
        "the softmax of one tile on rows of extreme scores",
        f"T_q = T_k = {T}, query 0 scoring every key near -150, query 1 every key 0, query 2 every key near +150",
        _padded(Q, K, V, device),
        (T, T) if tiled else None,
        rounding,
        is_causal=False,
    )


def _several_key_tiles(tiled: bool, device: str | torch.device) -> Step:
    """Scores that grow along the keys: the running max rises from one key tile to the next."""
    T_q, T_k = (8, 32) if tiled else (16, 256)
    Q, K, V = _inputs(T_q, T_k, 16, 16, 720, device)
    K.mul_(torch.linspace(0.5, 2.5, T_k, device=K.device)[:, None])  # in place: K stays a view into its padded buffer
    Q[..., 0].abs_().add_(1.0)
    K[..., 0].abs_()  # query and key along the first component agree in sign: larger keys score higher
    return _step(
        "carrying the running max, sum and output from one key tile to the next",
        f"T_q = {T_q}, T_k = {T_k}, d = 16, scores growing along the keys"
        + ("" if tiled else " (two or more key tiles for any tile of up to 128)"),
        (Q, K, V),
        (8, 8) if tiled else None,
        is_causal=False,
    )


def _ragged(tiled: bool, device: str | torch.device) -> Step:
    T_q, T_k = (10, 27) if tiled else (20, 40)
    return _step(
        "the ragged last query and key tiles (the masks past T_q and T_k)",
        f"T_q = {T_q}, T_k = {T_k}, d = 16" + ("" if tiled else " (multiples of no tile of 16 to 128)"),
        _inputs(T_q, T_k, 16, 16, 730, device),
        (4, 8) if tiled else None,
        is_causal=False,
    )


def _options(tiled: bool, device: str | torch.device) -> list[Step]:
    """The (batch, head) offsets, a head dimension that is not a power of two, and a given scale."""
    T = 8 if tiled else 16
    tiles = (T, T) if tiled else None
    d, d_v = (6, 5) if tiled else (12, 12)
    heads = "d = 6 for Q and K, d_v = 5 for V" if tiled else "d = 12"
    head_step = "head dimensions that differ and are not powers of two" if tiled else "a head dimension that is not a power of two"
    return [
        _step(
            "the offsets and strides of each (batch, head)",
            f"B = 2, H = 3, T_q = T_k = {T}, K and V transposed from [B, T, H, d]",
            _heads_and_layout(T, device),
            tiles,
        ),
        _step(head_step, f"T_q = T_k = {T}, {heads}", _inputs(T, T, d, d_v, 750, device), tiles),
        _step("the scale the caller gives", f"T_q = T_k = {T}, scale = 1.0", _inputs(T, T, 16, 16, 760, device), tiles, scale=1.0),
        _step("the scale the caller gives", f"T_q = T_k = {T}, scale = 0.3", _inputs(T, T, 16, 16, 770, device), tiles, scale=0.3),
    ]


def _heads_and_layout(T: int, device: str | torch.device) -> tuple[torch.Tensor, ...]:
    """Q [2, 3, T, T]; K and V [2, 3, T, T] views of [B, T, H, d] tensors, so that their strides are not Q's."""
    Q = nan_padded(random_tensor(2, 3, T, T, seed=740).to(device), PAD_ROWS, PAD_COLUMNS)
    K, V = (nan_padded(random_tensor(2, T, 3, T, seed=741 + i).to(device), PAD_ROWS, 0, PAD_COLUMNS).transpose(1, 2) for i in range(2))
    return Q, K, V


def _causal_steps(tiled: bool, device: str | torch.device) -> list[Step]:
    """The diagonal tile alone, several tiles, then T_q < T_k and T_q > T_k, all top-left causal."""
    if tiled:
        sizes, tiles = [(8, 8), (24, 24), (12, 20), (20, 12)], [(8, 8), (8, 4), (4, 8), (8, 4)]
    else:
        sizes, tiles = [(16, 16), (72, 72), (24, 40), (40, 24)], [None] * 4
    what = [
        ("the causal mask inside the diagonal tile", "the diagonal tile alone"),
        (
            "several causal tiles (the running statistics carried across them, those past the diagonal skipped, those it crosses masked)",
            "several tiles" + ("" if tiled else " for any tile of up to 64"),
        ),
        ("top-left causal masking with fewer queries than keys", "T_q < T_k"),
        ("top-left causal masking with more queries than keys", "T_q > T_k"),
    ]
    return [
        _step(
            step,
            f"is_causal=True, T_q = {T_q}, T_k = {T_k}, d = 16 ({inputs})",
            _inputs(T_q, T_k, 16, 16, 780 + 10 * i, device),
            t,
            is_causal=True,
        )
        for i, ((step, inputs), (T_q, T_k), t) in enumerate(zip(what, sizes, tiles))
    ]


def softmax_reference(x: torch.Tensor, *block: Any, **options: Any) -> torch.Tensor:
    """torch.softmax over the last dimension, in float64, returned in x's dtype (the block size is ignored)."""
    return torch.softmax(x.double(), dim=-1).to(x.dtype)


def softmax_ladder(*, block: str | None = None, masked: bool = True) -> list[Step]:
    """The rungs of a row-wise online softmax f(x, block) -> softmax(x, dim=-1), simplest first, in blocks of 16.

    Args:
        block: the keyword the function takes its block size by ("block" for online_softmax_rows), or None
            for the second positional argument (online_softmax's block_size).
        masked: end with a row whose first block is all -inf (masked), for a function whose contract covers it.

    Returns:
        [Step]: one block; one block of rows far below zero, equal and large; several blocks with the max rising
        in each; several with it falling; a ragged last block; a transposed x; then, if ``masked``, a leading block of -inf.
    """
    extreme = random_tensor(3, 16, seed=800)
    extreme[0] -= EXTREME
    extreme[1] = 0.0
    extreme[2] += EXTREME
    leading = random_tensor(2, 40, seed=810)
    leading[:, :16] = float("-inf")
    rows = [
        ("the softmax of one block", "x [2, 16] (one block)", random_tensor(2, 16, seed=820)),
        ("the softmax of one block on rows of extreme scores", "x [3, 16]: a row near -150, a row of zeros, a row near +150", extreme),
        (
            "carrying the running max and sum from one block to the next",
            "x [2, 48] = 0, 1, ..., 47 (the max rises in every block)",
            torch.arange(48.0).repeat(2, 1),
        ),
        (
            "carrying the running max and sum past blocks below it",
            "x [2, 48] = 47, 46, ..., 0 (every block after the first below the max)",
            torch.arange(47.0, -1.0, -1.0).repeat(2, 1),
        ),
        ("the ragged last block", "x [2, 40] (blocks of 16, the last one of 8)", random_tensor(2, 40, seed=830)),
        (
            "rows whose columns are not next to each other",
            "x [2, 40] with strides (1, 2), a transposed [40, 2]",
            random_tensor(40, 2, seed=840).t(),
        ),
        *([("a block whose every score is -inf", "x [2, 40] whose first block of 16 is -inf", leading)] if masked else []),
    ]
    return [
        Step(step, inputs, (x, 16) if block is None else (x,), {} if block is None else {block: 16}, exp_rounding(x))
        for step, inputs, x in rows
    ]


def if_new_nan(got: Any, without: Any, sentence: str) -> str:
    """``sentence`` where ``got`` holds NaN at an entry where ``without`` holds a number, else "" (and "" in the
    sealed run, or when the two are not tensors of one shape): a hint that names NaN's cause only on that evidence."""
    if _recording() or not (isinstance(got, torch.Tensor) and isinstance(without, torch.Tensor)) or got.shape != without.shape:
        return ""
    return sentence if bool((torch.isnan(got.detach().cpu()) & ~torch.isnan(without.detach().cpu())).any()) else ""
