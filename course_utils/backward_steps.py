"""Ladders of inputs for attention's backward pass, for ``kernel_steps.where_steps_differ``.

A tiled or fused backward pass (notebook 08's PyTorch tiles, its two Triton kernels) can go wrong in rebuilding
P from L, in dV = Pᵀ dO, in dP and dS = P ∘ (dP − D), in D = rowsum(dO ∘ O), in the scale of dQ and dK, in what
is summed across tiles (dQ over key tiles, dK and dV over query tiles), in the masks of ragged tiles, in a head
dimension that is not a power of two, and in the causal mask inside and across tiles. ``backward_ladder`` builds
one input per step, simplest first, so that the first rung whose gradients differ from ``backward_reference``'s
(float64 autograd of PyTorch's attention, never a solution) names the step, and which of dQ, dK, dV differs::

    located = where_steps_differ(flash_attention_backward, backward_reference, backward_ladder(tiled=True))
    assert check_each_close(got, expected, names=("dQ", "dK", "dV"), label=..., hint=located or "what was compared")

The first rungs isolate the formulas by their inputs: with dO and V sharing no feature, dP = dO Vᵀ and
D = rowsum(dO ∘ O) are exactly 0, so only P and dV = Pᵀ dO are at work; with each row of dO orthogonal to O's,
D = 0 while dP is not. Every input is small and seeded (no draw from the global random state); a kernel's inputs
sit in NaN-padded buffers (``inputs.nan_padded``), so a load past a tensor's end shows as NaN. ``preprocess_ladder``
does the same for D = rowsum(dO ∘ O) alone, against ``preprocess_reference``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from .attention_steps import if_new_nan
from .autograd_refs import logsumexp_of_scores, sdpa_gradients
from .inputs import nan_padded, random_tensor
from .kernel_steps import Step
from .tripwires import answers

KERNEL_BLOCK = 16  # a kernel's rungs pass block=16: tiles of 16 rows (the smallest tl.dot takes), T = 16 is one tile
PAD_ROWS, PAD_COLUMNS = 16, 8  # a kernel's inputs: NaN past T and past d, as the notebook's visible tests pad them


def backward_reference(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    O: torch.Tensor,
    dO: torch.Tensor,
    L: torch.Tensor,
    is_causal: bool = False,
    scale: float | None = None,
    **tiles: Any,
) -> dict[str, torch.Tensor]:
    """What a backward pass must return on a rung: autograd's gradients of PyTorch's attention, in float64.

    Args:
        Q: [..., T_q, d], K: [..., T_k, d], V: [..., T_k, d_v], dO: [..., T_q, d_v]. O and L are the forward's
            (the function under test reads them; autograd needs neither). is_causal: top-left, as
            F.scaled_dot_product_attention. scale: 1/sqrt(d) when None. tiles: block_q, block_k, block (ignored).

    Returns:
        {"dQ": like Q, "dK": like K, "dV": like V}, computed in float64 and returned in the inputs' dtypes.
    """
    dQ, dK, dV = sdpa_gradients(Q.double(), K.double(), V.double(), dO.double(), is_causal=is_causal, scale=scale)
    return {"dQ": dQ.to(Q.dtype), "dK": dK.to(K.dtype), "dV": dV.to(V.dtype)}


def backward_ladder(*, tiled: bool, causal: bool = False, device: str | torch.device = "cpu") -> list[Step]:
    """The rungs of a backward pass f(Q, K, V, O, dO, L, is_causal=..., scale=..., tiles) -> (dQ, dK, dV), simplest first.

    Args:
        tiled: True for a function that takes its tiles as ``block_q=`` and ``block_k=`` (notebook 08's
            flash_attention_backward): float64 inputs, tiles of a few rows, V's head dimension may differ from
            Q's. False for a kernel launcher that takes ``block=`` (flash_attention_backward_triton): float32
            inputs in NaN-padded buffers, tiles of 16 rows.
        causal: the causal test's ladder (6 rungs): one tile and several ragged tiles without the mask, then the
            diagonal tile alone, several tiles, T_q < T_k and T_q > T_k, all top-left causal. Else the
            non-causal one (8 rungs, 9 for a kernel): P and dV alone; dP, dS, dQ and dK with D = 0; D; the
            scale; dQ summed over key tiles; dK and dV summed over query tiles; ragged tiles; a head dimension
            that is not a power of two (d_v != d for the tiles); for a kernel, the (batch, head) offsets.
        device: where the inputs live ("cuda" for kernels compiled for a GPU).

    Returns:
        [Step], each with args (Q, K, V, O, dO, L) and kwargs (is_causal, scale when given, and the tiles).
    """
    T = 4 if tiled else KERNEL_BLOCK  # one tile of queries and one of keys
    rung = _TiledRung(tiled, device)
    one_tile = rung(
        "the gradients of one tile (P, dV, dP, D, dS, dQ and dK)",
        "one tile, not causal",
        (T, T),
        seed=300,
    )
    ragged_sizes = (11, 13) if tiled else (21, 37)
    ragged = rung(
        "the ragged last tiles (the masks past T_q and T_k)",
        "T_q and T_k multiples of no tile" + ("" if tiled else ", NaN past T and past d"),
        ragged_sizes,
        tiles=(4, 5) if tiled else None,
        seed=360,
    )
    if causal:
        return [one_tile, ragged, *_causal_rungs(rung, T)]
    d, d_v = (3, 5) if tiled else (12, 12)
    steps = [
        *_formula_rungs(rung, T),
        rung("dQ summed over key tiles", "one query tile, two key tiles", (T, 2 * T), seed=340),
        rung("dK and dV summed over query tiles", "two query tiles, one key tile", (2 * T, T), seed=350),
        ragged,
        rung(
            "a value head dimension other than the queries' (d_v != d)" if tiled else "a head dimension that is not a power of two",
            "one tile" if tiled else "one tile, padded to 16 features inside, NaN past d",
            (T, T),
            d=d,
            d_v=d_v,
            seed=370,
        ),
    ]
    if not tiled:
        steps.append(rung("the offsets of each (batch, head)", "one tile per (batch, head)", (T, T), heads=(2, 3), seed=380))
    return steps


def _formula_rungs(rung: _TiledRung, T: int) -> list[Step]:
    """One tile each: P and dV alone (dP = D = 0), then dS, dQ and dK with D = 0, then D, then the default scale."""
    return [
        rung(
            "the weights P = exp(scale·Q Kᵀ − L) rebuilt from L, and dV = Pᵀ dO",
            "one tile, scale = 1.0, dO and V sharing no feature (so dP = dO Vᵀ = 0 and D = 0: only dV is not 0)",
            (T, T),
            seed=300,
            scale=1.0,
            upstream="no dP",
        ),
        rung(
            "dP = dO Vᵀ, dS = P ∘ (dP − D), dQ = scale·dS K and dK = scale·dSᵀ Q (with D = 0)",
            "one tile, scale = 1.0, each row of dO orthogonal to O's (so D = rowsum(dO ∘ O) = 0)",
            (T, T),
            seed=310,
            scale=1.0,
            upstream="no D",
        ),
        rung("D = rowsum(dO ∘ O), subtracted from dP in dS", "one tile, scale = 1.0", (T, T), seed=320, scale=1.0),
        rung(
            "the scale, in S = scale·Q Kᵀ, dQ and dK",
            f"one tile, the default scale 1/sqrt(d) = {rung.head_dim**-0.5:g} (scale = 1.0 before)",
            (T, T),
            seed=330,
        ),
    ]


def _causal_rungs(rung: _TiledRung, T: int) -> list[Step]:
    """The diagonal tile alone, several tiles, then T_q < T_k and T_q > T_k, all top-left causal."""
    if rung.tiled:
        sizes, tiles = [(T, T), (12, 12), (9, 14), (14, 9)], [(T, T), (4, 3), (4, 3), (3, 4)]
    else:
        sizes, tiles = [(T, T), (48, 48), (20, 35), (35, 20)], [None] * 4
    what = [
        ("the causal mask inside the diagonal tile", "the diagonal tile alone"),
        ("the causal mask across tiles (those past the diagonal skipped, those it crosses masked)", "several tiles"),
        ("top-left causal masking with fewer queries than keys", "T_q < T_k"),
        ("top-left causal masking with more queries than keys", "T_q > T_k"),
    ]
    return [
        rung(step, f"is_causal=True, {inputs}", size, tiles=t, seed=400 + 10 * i, is_causal=True)
        for i, ((step, inputs), size, t) in enumerate(zip(what, sizes, tiles))
    ]


class _TiledRung:
    """Builds the rungs of one ladder: a kernel's or the tiles' dtype, tiles, padding and device."""

    def __init__(self, tiled: bool, device: str | torch.device) -> None:
        self.tiled, self.device = tiled, device
        self.dtype = torch.float64 if tiled else torch.float32
        self.head_dim = 4 if tiled else 16  # unless a rung asks for another

    def __call__(
        self,
        step: str,
        inputs: str,
        sizes: tuple[int, int],
        *,
        seed: int,
        tiles: tuple[int, int] | None = None,
        d: int = 0,
        d_v: int = 0,
        heads: tuple[int, int] = (1, 1),
        scale: float | None = None,
        is_causal: bool = False,
        upstream: str = "any",
    ) -> Step:
        T_q, T_k = sizes
        d = d or self.head_dim
        d_v = d_v or d
        args = _backward_inputs(T_q, T_k, d, d_v, heads, seed, self.dtype, is_causal, scale, upstream)
        if self.tiled:
            tiles = tiles or (min(4, T_q), min(4, T_k))
            kwargs: dict[str, Any] = {"block_q": tiles[0], "block_k": tiles[1]}
            where = f", tiles of {tiles[0]} queries by {tiles[1]} keys"
        else:
            args = tuple(nan_padded(t.to(self.device), *((PAD_ROWS,) if t.dim() == 3 else (PAD_ROWS, PAD_COLUMNS))) for t in args)
            kwargs, where = {"block": KERNEL_BLOCK}, f", block={KERNEL_BLOCK}"
        shape = f"B = {heads[0]}, H = {heads[1]}, " if heads != (1, 1) else ""
        sized = f"T_q = {T_q}, T_k = {T_k}, d = {d}" + (f", d_v = {d_v}" if d_v != d else "")
        options = {"is_causal": is_causal, **({} if scale is None else {"scale": scale})}
        return Step(step, f"{inputs} ({shape}{sized}{where})", args, {**options, **kwargs})


def _backward_inputs(
    T_q: int,
    T_k: int,
    d: int,
    d_v: int,
    heads: tuple[int, int],
    seed: int,
    dtype: torch.dtype,
    is_causal: bool,
    scale: float | None,
    upstream: str,
) -> tuple[torch.Tensor, ...]:
    """(Q, K, V, O, dO, L) in ``dtype``: O and L the forward's (from float64), dO as ``upstream`` asks.

    ``upstream``: "any" (seeded normal); "no dP" (V is 0 on the first half of its features and dO on the
    second, so dP = dO Vᵀ = 0 and D = rowsum(dO ∘ O) = 0 exactly); "no D" (each row of dO orthogonal to
    O's, so D = 0 while dP is not).
    """
    Q, K, V, dO = (
        random_tensor(*heads, T, width, seed=seed + i, dtype=dtype)
        for i, (T, width) in enumerate(((T_q, d), (T_k, d), (T_k, d_v), (T_q, d_v)))
    )
    if upstream == "no dP":
        half = d_v // 2
        V[..., :half] = 0.0
        dO[..., half:] = 0.0
    O = F.scaled_dot_product_attention(Q.double(), K.double(), V.double(), is_causal=is_causal, scale=scale).to(dtype)
    if upstream == "no D":
        Od, dOd = O.double(), dO.double()
        dO = (dOd - (dOd * Od).sum(-1, keepdim=True) / (Od * Od).sum(-1, keepdim=True) * Od).to(dtype)
    return Q, K, V, O, dO, logsumexp_of_scores(Q, K, scale=scale, is_causal=is_causal)


def if_new_nan_in(got: Any, expected: Sequence[torch.Tensor], sentence: str) -> str:
    """``attention_steps.if_new_nan`` for results returned together (dQ, dK, dV): ``sentence`` where one of them holds
    NaN at an entry where its expected tensor holds a number, else "" (and "" for a result that is no tuple of them)."""
    if not isinstance(got, (tuple, list)):
        return ""
    return next((found for found in (if_new_nan(g, e, sentence) for g, e in zip(got, expected)) if found), "")


def extreme_scores(
    T_q: int, T_k: int, d: int, *, size: float, seed: int, dtype: torch.dtype = torch.float64, heads: tuple[int, ...] = (1, 2)
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded Q, K, V, dO whose scaled scores (scale 1/sqrt(d)) are extreme on three rows: query 0 scores every key
    near -size, query 1 every key exactly 0 (equal weights), query 2 every key near +size; the others are random.

    Args:
        T_q (at least 3), T_k, d: the lengths and the head dimension; size: how far from 0 (150 overflows exp in
            float32, 800 in float64); seed: the first of four seeds; dtype; heads: the leading dimensions.

    Returns:
        Q [*heads, T_q, d], K, V [*heads, T_k, d], dO [*heads, T_q, d], in ``dtype``.
    """
    Q, K, V, dO = (random_tensor(*heads, T, d, seed=seed + i, dtype=torch.float64) for i, T in enumerate((T_q, T_k, T_k, T_q)))
    K[..., 0] = 4.0  # every key's first feature: a query along it shifts all its scores alike
    Q[..., 0, :], Q[..., 1, :], Q[..., 2, :] = Q[..., 0, :] / 4, 0.0, Q[..., 2, :] / 4
    Q[..., 0, 0], Q[..., 2, 0] = -size * math.sqrt(d) / 4, size * math.sqrt(d) / 4  # scores -size and +size, give or take 1
    return tuple(t.to(dtype) for t in (Q, K, V, dO))  # type: ignore[return-value]


@answers("08_flash_backward", "flash_backward_preprocess")
def preprocess_reference(O: torch.Tensor, dO: torch.Tensor) -> torch.Tensor:
    """D = rowsum(dO ∘ O), summed in float64; returned in float32, or float64 for float64 inputs: [..., T_q]."""
    return (dO.double() * O.double()).sum(dim=-1).to(torch.promote_types(O.dtype, torch.float32))


def preprocess_ladder() -> list[Step]:
    """The rungs of D = f(O, dO) = rowsum(dO ∘ O), simplest first: one row, many rows, leading dimensions,
    then bfloat16 and float16 inputs (whose sums must be taken in float32), all against ``preprocess_reference``.

    Returns:
        [Step], each with args (O, dO).
    """

    def pair(*shape: int, seed: int, dtype: torch.dtype = torch.float64, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        return random_tensor(*shape, seed=seed, dtype=dtype, scale=scale), random_tensor(*shape, seed=seed + 1, dtype=dtype, scale=scale)

    return [
        Step("the sum of dO ∘ O over the feature dimension", "O, dO [1, 5] (one query row), float64", pair(1, 5, seed=500)),
        Step("one sum per query row", "O, dO [6, 5] (six query rows), float64", pair(6, 5, seed=510)),
        Step("the leading (batch, head) dimensions", "O, dO [2, 3, 6, 5], float64", pair(2, 3, 6, 5, seed=520)),
        Step(
            "the float32 sums of low-precision inputs",
            "O, dO [2, 6, 64] in bfloat16 (D in float32)",
            pair(2, 6, 64, seed=530, dtype=torch.bfloat16, scale=4.0),
        ),
        Step(
            "the float32 sums of low-precision inputs",
            "O, dO [2, 6, 64] in float16 (D in float32)",
            pair(2, 6, 64, seed=540, dtype=torch.float16, scale=4.0),
        ),
    ]
