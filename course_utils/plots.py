"""The few pictures the notebooks draw again and again: weights as bars, matrices as heatmaps."""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import numpy
import torch
from matplotlib.axes import Axes


def _new_axes(ax: Axes | None, figsize: tuple[float, float] = (5.0, 3.0)) -> Axes:
    if ax is not None:
        return ax
    _, ax = plt.subplots(figsize=figsize)
    return ax


def bar_weights(
    weights: torch.Tensor,
    labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool = True,
) -> Axes:
    """One bar per key: how much of the output each value contributes."""
    values = weights.detach().cpu().double().flatten().tolist()
    labels = list(labels) if labels is not None else [str(i) for i in range(len(values))]
    ax = _new_axes(ax)
    bars = ax.bar(labels, values, color="tab:blue")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("weight")
    if annotate:
        for bar, value in zip(bars, values):
            ax.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def heatmap(
    matrix: torch.Tensor,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool = True,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    missing_label: str | None = None,
) -> Axes:
    """A 2-D matrix [rows, cols] (attention weights: rows are queries, columns are keys), with a colour bar.

    Cells that are not finite (NaN, -inf: a fully masked row, a masked score) are drawn light grey and
    labelled with ``missing_label`` (default: their value, "nan" or "-inf"), so an empty row is seen, not guessed.
    Each label is black or white by the brightness of the colour under it, so it stays readable.
    """
    data = matrix.detach().cpu().double()
    if data.dim() != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {list(data.shape)}")
    ax = _new_axes(ax, figsize=(0.6 * data.shape[1] + 2.0, 0.5 * data.shape[0] + 1.2))
    colours = plt.get_cmap(cmap).with_extremes(bad="lightgrey")
    image = ax.imshow(numpy.ma.masked_invalid(data.numpy()), cmap=colours, vmin=vmin, vmax=vmax, aspect="auto")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.grid(False)
    rows, cols = data.shape
    if row_labels is not None:
        ax.set_yticks(range(rows), labels=list(row_labels))
    elif rows <= 20:  # integer positions, not matplotlib's fractional defaults
        ax.set_yticks(range(rows))
    if col_labels is not None:
        ax.set_xticks(range(cols), labels=list(col_labels))
    elif cols <= 20:
        ax.set_xticks(range(cols))
    if annotate and data.numel() <= 100:
        for i in range(rows):
            for j in range(cols):
                value = data[i, j].item()
                if math.isfinite(value):
                    text, background = f"{value:.2f}", colours(image.norm(value))
                else:
                    text, background = missing_label or f"{value:g}", colours.get_bad()
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color=label_colour(background))
    if title:
        ax.set_title(title)
    return ax


def label_colour(background: Sequence[float]) -> str:
    """Black on a light colour, white on a dark one (the colour's relative luminance, sRGB weights)."""
    red, green, blue = background[:3]
    return "black" if 0.2126 * red + 0.7152 * green + 0.0722 * blue > 0.45 else "white"


def program_map(
    owner: torch.Tensor,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    label: str = "program",
    annotate: bool = True,
) -> Axes:
    """Which program instance touches each element of a tensor: one colour per program id.

    ``owner`` holds a program id per element (1-D or 2-D); ``-1`` marks a lane that exists in a
    block but lies past the tensor's edge, so its load and store must be masked (drawn hatched).
    """
    grid = owner.detach().cpu().long()
    grid = grid[None, :] if grid.dim() == 1 else grid
    ax = _new_axes(ax, figsize=(min(10.0, 1.5 + 0.22 * grid.shape[1]), min(5.0, 0.9 + 0.3 * grid.shape[0])))
    programs = int(grid.max().item()) + 1
    shown = grid.double().masked_fill(grid < 0, float("nan"))
    ax.imshow(shown, cmap=plt.get_cmap("tab20", max(programs, 1)), vmin=-0.5, vmax=max(programs, 1) - 0.5, aspect="auto")
    for row, col in (grid < 0).nonzero().tolist():  # lanes past the edge: what the mask switches off
        ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, hatch="///", edgecolor="gray", lw=0))
    if annotate and grid.numel() <= 160:
        for (row, col), value in zip(
            torch.cartesian_prod(torch.arange(grid.shape[0]), torch.arange(grid.shape[1])).tolist(), grid.flatten().tolist()
        ):
            if value >= 0:
                ax.text(col, row, str(value), ha="center", va="center", fontsize=7, color="white")
    ax.set_xticks([])
    ax.set_yticks([] if grid.shape[0] == 1 else range(grid.shape[0]))
    ax.grid(False)
    ax.set_title(title or f"the {label} that touches each element (hatched: masked lanes)")
    return ax


SKIPPED, MASKED, FULL = 0, 1, 2  # the kinds of tile in causal attention


def causal_tile_status(n_q: int, n_k: int, block_q: int, block_k: int) -> torch.Tensor:
    """For causal (top-left) attention in tiles: SKIPPED, MASKED or FULL per [query block, key block].

    A tile is skipped when all its keys lie in its queries' future, masked when it crosses the
    diagonal, and full when every query sees every key.

    Returns:
        [n_q, n_k] int64.
    """
    first_query = torch.arange(n_q)[:, None] * block_q
    last_query = first_query + block_q - 1
    first_key = torch.arange(n_k)[None, :] * block_k
    last_key = first_key + block_k - 1
    return torch.where(first_key > last_query, SKIPPED, torch.where(last_key > first_query, MASKED, FULL))


def causal_tile_map(status: torch.Tensor, *, keys_outside: bool = False, ax: Axes | None = None, title: str | None = None) -> Axes:
    """Draw ``causal_tile_status``: full tiles blue, masked orange, skipped white.

    ``keys_outside``: number each computed tile by the step at which its key block's loop over query
    blocks reaches it (the backward pass's order).
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    colours = ["white", "tab:orange", "tab:blue"]
    ax = _new_axes(ax, figsize=(4.2, 4.2))
    ax.imshow(status, cmap=ListedColormap(colours), vmin=SKIPPED, vmax=FULL)
    if keys_outside:
        for j in range(status.shape[1]):
            computed = (status[:, j] != SKIPPED).nonzero().flatten().tolist()
            for step, i in enumerate(computed):
                ax.text(j, i, str(step), ha="center", va="center", fontsize=8)
    ax.legend(
        handles=[Patch(facecolor=c, edgecolor="gray", label=k) for c, k in zip(colours, ("skipped", "masked", "full"))],
        loc="upper right",
        fontsize=8,
    )
    ax.set(
        xlabel="key block j" + (" (the outer loop)" if keys_outside else ""),
        ylabel="query block i",
        title=title or "causal attention in tiles",
    )
    ax.grid(False)
    return ax


# The H100 SXM's spec-sheet figures (dense bf16 tensor-core FLOP/s, HBM3 bytes/s): notebooks 06 and 08 place attention on its roofline.
H100_SXM_BF16 = (989e12, 3.35e12)


def roofline(
    peak_flops: float,
    bandwidth: float,
    points: dict[str, float],
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Draw the roofline min(peak, intensity x bandwidth) on log-log axes, with each point of ``points``
    (label -> arithmetic intensity in FLOP/byte) placed on it and the ridge point marked.
    """
    import numpy as np

    ax = _new_axes(ax, figsize=(5.0, 3.4))
    ridge = peak_flops / bandwidth
    low, high = min([ridge, *points.values()]) / 10, max([ridge, *points.values()]) * 10
    intensities = np.logspace(np.log10(low), np.log10(high), 200)
    ax.loglog(intensities, np.minimum(peak_flops, intensities * bandwidth), "k-", label=f"roofline (ridge {ridge:.0f} FLOP/B)")
    ax.axvline(ridge, color="gray", lw=0.8, ls=":")
    for (label, intensity), marker in zip(points.items(), "o^sDvP*X"):
        ax.loglog(intensity, min(peak_flops, intensity * bandwidth), marker, label=f"{label} ({intensity:.0f} FLOP/B)")
    ax.set(title=title, xlabel="arithmetic intensity (FLOP/byte)", ylabel="attainable FLOP/s")
    ax.legend(fontsize=7)
    return ax
