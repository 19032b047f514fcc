"""Notebook 09's PyTorch references: RoPE, masked attention, a decoder block and a tiny language model.

Tests stand these in for the student's functions (``call(..., stand_ins=BLOCK_STAND_INS)``), so that
a slip in one graded function costs points only on its own tests, and build expected values from
them (``ReferenceBlock`` runs ``F.scaled_dot_product_attention``). Built from public torch operations
only. The RoPE convention is the one notebook 09 states: halves (``rotate_half``), as in GPT-NeoX and
Hugging Face's LLaMA.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from .guards import Guards
from .recording import measured
from .stand_ins import CAUSAL_MASK_STAND_IN, HEADS_STAND_IN, torch_causal_mask
from .tripwires import answers, runs_noted

# Bound once, here: a "do not call the built-in" tripwire on the Python names must not trip over a stand-in.
_softmax = torch.softmax
_sdpa = F.scaled_dot_product_attention


@answers("09_language_model", "rope")
def rope_angles(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The rotation angles, in float64: angle[t, i] = positions[t] * base ** (-2 i / dim).

    Returns:
        [T, dim // 2] float64, for positions [T] and an even ``dim``.
    """
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)
    return positions.to(torch.float64)[:, None] * inv_freq[None, :]


@answers("09_language_model", "rope")
def torch_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Notebook 09's ``rope``: rotate the pairs (x[i], x[i + d/2]) of each token by positions * base**(-2i/d).

    Args:
        x: [..., T, d] with d even; positions: [T] integer positions.

    Returns:
        [..., T, d] in x's dtype; the angles and the rotation are computed in float64.
    """
    d = x.shape[-1]
    angles = rope_angles(positions, d, base)  # [T, d/2]
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., : d // 2].double(), x[..., d // 2 :].double()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


@answers("03_scaled_dot_product_attention", "scaled_dot_product_attention")
@answers("04_masking", "scaled_dot_product_attention")
def torch_masked_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 04's ``scaled_dot_product_attention`` by PyTorch: (output, weights), bool masks True = attend.

    Returns:
        (output [..., T_q, d_v], weights [..., T_q, T_k]); rows with every key masked are 0 in both.
    """
    # Worded apart from the graded solutions (the handout's leak scan): the course's causal mask, a bool mask as a bias.
    keep = torch_causal_mask(Q.shape[-2], K.shape[-2], device=Q.device) if is_causal else attn_mask
    scores = torch.matmul(Q, K.transpose(-2, -1)).mul(Q.shape[-1] ** -0.5 if scale is None else scale)
    if keep is not None and keep.dtype == torch.bool:
        scores = scores.masked_fill(keep.logical_not(), -torch.inf)
    elif keep is not None:
        scores = scores.add(keep)
    empty = torch.isneginf(scores).all(dim=-1, keepdim=True)
    weights = _softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    return weights @ V, weights


def causal_for_sdpa(T_q: int, T_k: int) -> bool:
    """The ``is_causal`` that makes a function with SDPA's interface attend causally, bottom-right.

    SDPA's ``is_causal`` is top-left: the same as bottom-right where T_q = T_k. Over a cache, one new query
    sees every key (``False``); several new queries need a mask that ``is_causal`` cannot give.

    Raises:
        ValueError: 1 < T_q < T_k.
    """
    if T_q != T_k and T_q != 1:
        raise ValueError(f"is_causal is top-left: {T_q} new queries over {T_k} keys need a bottom-right mask; decode one token at a time")
    return T_q == T_k


class ReferenceBlock(nn.Module):
    """A pre-norm decoder block with notebook 09's parameter names, attention by ``F.scaled_dot_product_attention``.

    Shapes: x [B, T, D] -> [B, T, D]; the cache holds keys and values [B, H, T_cached, D / H] after RoPE.
    """

    def __init__(self, d_model: int, num_heads: int, use_rope: bool = True, attention=None, random_norms: bool = False):
        super().__init__()
        self.num_heads, self.use_rope = num_heads, use_rope
        self.attention = attention  # None: masked attention by PyTorch; else attention(q, k, v, is_causal=...), as DecoderBlock
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.cache_k: torch.Tensor | None = None
        self.cache_v: torch.Tensor | None = None
        if random_norms:  # freshly made, the two layer norms are the same function: a block that swaps them would pass
            with torch.no_grad():
                for norm in (self.norm1, self.norm2):
                    norm.weight.uniform_(0.5, 1.5)
                    norm.bias.normal_(0.0, 0.2)

    def clear_cache(self) -> None:
        """Forget the cached keys and values."""
        self.cache_k = self.cache_v = None

    @answers("09_language_model", "DecoderBlock")
    def forward(self, x: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        """x + attn(norm1(x)), then + mlp(norm2(x)); causal, RoPE at positions start_pos.. start_pos + T - 1.

        Returns:
            [B, T, D].
        """
        B, T, D = x.shape
        q, k, v = (t.view(B, T, self.num_heads, D // self.num_heads).transpose(1, 2) for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        if self.use_rope:
            positions = torch.arange(start_pos, start_pos + T, device=x.device)
            q, k = rope(q, positions), rope(k, positions)  # by these names, so course_utils.composite_steps can trace them
        if use_cache:
            if self.cache_k is not None:
                k, v = torch.cat([self.cache_k, k], dim=-2), torch.cat([self.cache_v, v], dim=-2)
            self.cache_k, self.cache_v = k, v
        if self.attention is None:
            allowed = torch.ones(T, k.shape[-2], dtype=torch.bool, device=x.device).tril(k.shape[-2] - T)  # bottom-right
            out, _ = scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        else:
            out = self.attention(q, k, v, is_causal=causal_for_sdpa(T, k.shape[-2]))
        x = x + self.out_proj(out.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.norm2(x))


class ReferenceLM(nn.Module):
    """A tiny decoder-only language model from ``ReferenceBlock``s, with notebook 09's ``TinyLM`` interface.

    Shapes: tokens [B, T] (int64) -> logits [B, T, vocab].
    """

    def __init__(self, vocab: int, d_model: int, num_heads: int, num_layers: int = 2, use_rope: bool = True):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(ReferenceBlock(d_model, num_heads, use_rope) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def clear_cache(self) -> None:
        """Forget every block's cached keys and values."""
        for block in self.blocks:
            block.clear_cache()

    @answers("09_language_model", "TinyLM")
    def forward(self, tokens: torch.Tensor, start_pos: int = 0, use_cache: bool = False) -> torch.Tensor:
        """Logits for the next token at every position.

        Returns:
            [B, T, vocab].
        """
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, start_pos=start_pos, use_cache=use_cache)
        return self.head(self.norm(x))


def model_calls(model: nn.Module, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """How ``fn(*args, **kwargs)`` called ``model``: for each call, in order, the tokens' shape, ``start_pos`` and ``use_cache``.

    A generate that uses its cache calls the model once with the prompt at ``start_pos=0``, then once per
    new token with that one token at its position; one that recomputes passes the whole sequence each
    time. Every run of the model's ``forward`` counts, however it was reached (``model(...)``, ``model.forward``,
    ``type(model).forward(model, ...)``, a name built at run time, a copy of the model): its function's code
    notes the call (``tripwires.runs_noted``). So does a run of one of its blocks (a submodule whose ``forward``
    takes ``use_cache``) outside the model's: the model run by hand, listed with ``"by_hand": True``.
    Under grading the sealed run records the calls and the trusted replay reads them.
    """
    if not any(value is model for value in args):
        raise ValueError("model_calls: the model must be one of the arguments, so that its calls can be told")
    index = next(i for i, value in enumerate(args) if value is model)

    def measure(thunk: Callable[[], Any], inputs: tuple, named: dict[str, Any]) -> list[dict[str, Any]]:
        watched = inputs[index]  # run again on a copy of the model, it watches the copy
        calls: list[dict[str, Any]] = []
        inside = [0]  # runs of the model's forward under way: a block run inside one is the model's own

        def noting(forward: Callable[..., Any], block: bool) -> Callable[..., Any]:
            signature = inspect.signature(forward)

            def around(run: Callable[..., Any], positional: tuple, keywords: dict[str, Any]) -> Any:
                if not (block and inside[0]):
                    calls.append(_call_seen(signature, positional, keywords) | ({"by_hand": True} if block else {}))
                inside[0] += not block
                try:
                    return run(*positional, **keywords)
                finally:
                    inside[0] -= not block

            return around

        model_forward = type(watched).forward
        blocks = {
            type(m).forward
            for m in watched.modules()
            if "use_cache" in inspect.signature(type(m).forward).parameters and not getattr(type(m).forward, "__closure__", None)
        }
        with contextlib.ExitStack() as stack:
            for forward in [model_forward, *(blocks - {model_forward})]:
                stack.enter_context(runs_noted(forward, noting(forward, forward is not model_forward)))
            thunk()
        return calls

    measure.takes_inputs = True  # type: ignore[attr-defined]
    return measured("model_calls", fn, args, kwargs, measure)


def _call_seen(signature: inspect.Signature, positional: tuple, keywords: dict[str, Any]) -> dict[str, Any]:
    """One run of a model's (or a block's) forward: its input's [B, T], ``start_pos`` and ``use_cache``."""
    bound = signature.bind(*positional, **keywords)
    bound.apply_defaults()
    arguments = list(bound.arguments.values())  # any model of its class: a copy of it recomputes as well
    tokens = arguments[1] if len(arguments) > 1 else None  # after self: the tokens, or a block's x
    return {
        "tokens": [int(n) for n in tokens.shape[:2]] if isinstance(tokens, torch.Tensor) else None,
        "start_pos": int(bound.arguments.get("start_pos", 0)),
        "use_cache": bool(bound.arguments.get("use_cache", False)),
    }


def describe_calls(calls: list[dict[str, Any]], most: int = 6) -> str:
    """``calls`` (from ``model_calls``) in a line: "tokens [2, 5] at 0 (cache), tokens [2, 1] at 5 (cache), ..."."""
    shown = [
        f"{'a block run by hand on ' if c.get('by_hand') else ''}tokens {c['tokens']} at {c['start_pos']}{' (cache)' if c['use_cache'] else ''}"
        for c in calls[:most]
    ]
    return ", ".join(shown) + (f", ... ({len(calls)} calls)" if len(calls) > most else "")


@torch.no_grad()
@answers("09_language_model", "generate")  # the function no_grad wraps: the wrapper calls it
def greedy_by_recomputation(model: nn.Module, prompt: torch.Tensor, n_new: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding without a cache: the whole sequence through the model at every step.

    Returns:
        (tokens [B, T_prompt + n_new], logits [B, n_new, vocab]: the logits each new token was chosen from).
    """
    tokens, chosen_from = prompt, []
    for _ in range(n_new):
        last = model(tokens)[:, -1]
        chosen_from.append(last)
        tokens = torch.cat([tokens, last.argmax(dim=-1, keepdim=True)], dim=1)
    return tokens, torch.stack(chosen_from, dim=1)


# The names ReferenceBlock calls its pieces by (course_utils.composite_steps traces them there, as in a notebook).
rope = torch_rope


@answers("03_scaled_dot_product_attention", "scaled_dot_product_attention")
@answers("04_masking", "scaled_dot_product_attention")
def scaled_dot_product_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, attn_mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, None]:
    """``F.scaled_dot_product_attention`` with notebook 04's return convention (its weights are not computed).

    Returns:
        (output [..., T_q, d_v], None).
    """
    return _sdpa(Q, K, V, attn_mask=attn_mask), None


ROPE_STAND_IN = {"rope": torch_rope}
MASKED_ATTENTION_STAND_IN = {"scaled_dot_product_attention": torch_masked_attention}  # notebook 04's, carried into 09
# Everything a decoder block of notebook 09 calls that another function grades: carried pieces and rope.
BLOCK_STAND_INS = {**CAUSAL_MASK_STAND_IN, **HEADS_STAND_IN, **MASKED_ATTENTION_STAND_IN, **ROPE_STAND_IN}
# Training tests only the training step: the reference block (its parameters made in DecoderBlock's order) stands in too.
TRAINING_STAND_INS = {**BLOCK_STAND_INS, "DecoderBlock": ReferenceBlock}

# The course's own model, attention and decoding: a line a student adds that names one is flagged for a person to
# read (course_utils.guards), as with course_utils.stand_ins.
GUARDS = Guards(
    names=(
        "torch_rope",
        "torch_masked_attention",
        "ReferenceBlock",
        "ReferenceLM",
        "greedy_by_recomputation",
        "ROPE_STAND_IN",
        "MASKED_ATTENTION_STAND_IN",
        "BLOCK_STAND_INS",
        "TRAINING_STAND_INS",
    )
)
