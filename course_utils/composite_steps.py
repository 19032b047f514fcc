"""Where a composite goes wrong: the first of its steps whose results differ from a reference's.

A decoder block (notebook 09) is traced step by step; a sequence of results (the logits of each token
``generate`` makes) is compared position by position.

A block's output can be wrong for many reasons, and a hint that guesses one of them misleads every
student whose bug is another. So when a block's output differs, the test runs it once more with its
intermediate results kept (``where_block_differs``): what its submodules read (forward hooks on
``qkv``, ``out_proj``, ``norm2``, ``mlp``) and what it hands to ``rope`` and to
``scaled_dot_product_attention`` (looked up by those names where the block's ``forward`` was defined,
as the stand-ins are). The reference block is traced the same way, and the message names the first
step whose values differ. It names a place, never a cause.

In the sealed run the student's steps are recorded like any result (``through=``), so the trusted pass
compares them; they only ever shape a message, never a score.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Any, Callable, Iterator

import torch
from torch import nn

from .comparisons import CheckFailed, _recording, check_close
from .student_calls import _run_student

# In the order the block computes them: (key, what a student reads).
BLOCK_STEPS: tuple[tuple[str, str], ...] = (
    ("attention_input", "what the attention sublayer reads (the input of qkv)"),
    ("before_rope", "q and k as given to rope (after the projection and the split into heads)"),
    ("after_rope", "q and k as rope returns them"),
    ("attended", "q, k and v as given to scaled_dot_product_attention"),
    ("mask", "the mask given to scaled_dot_product_attention"),
    ("attention_output", "the attention output with its heads merged (the input of out_proj)"),
    ("residual", "the residual stream after the attention sublayer (the input of norm2)"),
    ("mlp_input", "what the MLP reads (the input of mlp)"),
    ("output", "the block's output"),
)
_READS = {"attention_input": "qkv", "attention_output": "out_proj", "residual": "norm2", "mlp_input": "mlp"}


def block_steps(block: nn.Module) -> Callable[..., dict[str, list[torch.Tensor]]]:
    """A function that runs ``block(*args, **kwargs)`` and returns its intermediate results by step.

    Returns:
        a function of the block's arguments giving {step key: [tensors, in the order the block made them]}
        for the keys of ``BLOCK_STEPS`` that the block's code reached.
    """

    def run(*args: Any, **kwargs: Any) -> dict[str, list[torch.Tensor]]:
        steps: dict[str, list[torch.Tensor]] = defaultdict(list)
        with _hooks(block, steps), _traced_pieces(block, steps):
            output = block(*args, **kwargs)
        steps["output"].append(output)
        return {key: [t.detach().clone() for t in found] for key, found in steps.items() if all(isinstance(t, torch.Tensor) for t in found)}

    return run


def where_block_differs(block: Any, reference: nn.Module, *args: Any, stand_ins: dict[str, Any] | None = None, **kwargs: Any) -> str:
    """A hint for a block whose output differs from ``reference``'s: the first intermediate result that differs.

    ``block`` is the student's (as ``call`` returned it); the same stand-ins are in place as in the test's
    own call. Returns "" in the sealed run, where nothing is compared, and where no step can be compared.
    """
    outcome = _run_student(block, args, kwargs, "the block's intermediate results", stand_ins=stand_ins, through=("steps", block_steps))
    if _recording() or outcome.kind != "value" or not isinstance(outcome.value, dict):
        return ""
    return first_difference(outcome.value, block_steps(reference)(*args, **kwargs))


def first_difference(student: dict[str, Any], expected: dict[str, list[torch.Tensor]]) -> str:
    """Name the first step of ``BLOCK_STEPS`` whose tensors differ; skip steps the two blocks did not both reach alike.

    Returns:
        a sentence for the student, or "" when no step can be compared.
    """
    compared = []
    for key, description in BLOCK_STEPS:
        mine, theirs = student.get(key), expected.get(key)
        if not isinstance(mine, list) or not theirs or len(mine) != len(theirs):
            continue  # a block may reach a step differently (one rope call for q and k together): no evidence
        for got, want in zip(mine, theirs):
            problem = _difference(got, want)
            if problem:
                where = "" if not compared else f" (the steps before it match: {', '.join(compared)})"
                return f"the first of the block's intermediate results that differs from the reference block's is {description}: {problem}{where}"
        compared.append(key.replace("_", " "))
    return ""


def _difference(got: Any, want: torch.Tensor) -> str:
    """What differs, as ``check_close`` says it (shape, NaN, largest error and where), or "" when nothing does."""
    if want.dtype == torch.bool and isinstance(got, torch.Tensor) and got.shape == want.shape:
        wrong = got.to(torch.bool) != want  # a mask: how many entries, not its values
        return f"{int(wrong.sum())} of {wrong.numel()} entries differ" if wrong.any() else ""
    try:
        check_close(got, want, label="", check_dtype=False)
    except CheckFailed as failed:
        return failed.problem
    return ""


@contextlib.contextmanager
def _hooks(block: nn.Module, steps: dict[str, list[torch.Tensor]]) -> Iterator[None]:
    handles = []
    for key, name in _READS.items():
        module = getattr(block, name, None)
        if isinstance(module, nn.Module):
            handles.append(module.register_forward_hook(lambda _m, inputs, _out, key=key: steps[key].append(inputs[0])))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def _traced_pieces(block: nn.Module, steps: dict[str, list[torch.Tensor]]) -> Iterator[None]:
    """Wrap ``rope`` and ``scaled_dot_product_attention`` where the block's forward looks them up, for this run."""
    namespace = getattr(type(block).forward, "__globals__", None)
    if not isinstance(namespace, dict):
        yield
        return
    wrappers = {"rope": _traced_rope, "scaled_dot_product_attention": _traced_attention}
    saved = {name: namespace[name] for name in wrappers if callable(namespace.get(name))}
    namespace.update({name: wrappers[name](fn, steps) for name, fn in saved.items()})
    try:
        yield
    finally:
        namespace.update(saved)


def _traced_rope(rope: Callable[..., torch.Tensor], steps: dict[str, list[torch.Tensor]]) -> Callable[..., torch.Tensor]:
    def traced(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        steps["before_rope"].append(x)
        turned = rope(x, *args, **kwargs)
        steps["after_rope"].append(turned)
        return turned

    return traced


def _traced_attention(attention: Callable[..., Any], steps: dict[str, list[torch.Tensor]]) -> Callable[..., Any]:
    def traced(*args: Any, **kwargs: Any) -> Any:
        steps["attended"].extend(args[:3])
        mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
        if isinstance(mask, torch.Tensor):
            steps["mask"].append(mask)
        return attention(*args, **kwargs)

    return traced


def first_differing_position(got: Any, expected: torch.Tensor, *, what: str, dim: int = 1) -> str:
    """Name the first index along ``dim`` where ``got`` and ``expected`` differ: a place, not a cause.

    Returns:
        "the first {what} whose values differ is {what} i (0..i-1 match)", or "" when they cannot be compared or agree.
    """
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dim() <= dim:
        return ""
    for index in range(got.shape[dim]):
        problem = _difference(got.select(dim, index), expected.select(dim, index))
        if problem:
            before = f" ({what}s 0..{index - 1} match)" if index else ""
            return f"the first {what} whose values differ is {what} {index}: {problem}{before}"
    return ""
