"""The few pictures the notebooks draw again and again: weights as bars, matrices as heatmaps."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
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
) -> Axes:
    """A 2-D matrix (attention weights: rows are queries, columns are keys)."""
    data = matrix.detach().cpu().double()
    if data.dim() != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {list(data.shape)}")
    ax = _new_axes(ax, figsize=(0.6 * data.shape[1] + 2.0, 0.5 * data.shape[0] + 1.2))
    image = ax.imshow(data.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
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
        middle = (data.max() + data.min()).item() / 2
        for (i, j), value in zip(torch.cartesian_prod(torch.arange(data.shape[0]), torch.arange(data.shape[1])).tolist(), data.flatten().tolist()):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8, color="black" if value > middle else "white")
    if title:
        ax.set_title(title)
    return ax
