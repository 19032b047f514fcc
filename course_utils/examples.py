"""Small example inputs that several test cells of one notebook share.

Each function returns fresh tensors, so no test can change another's inputs.
"""

from __future__ import annotations

import torch


def cat_dog_mat_table() -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 01's toy table: one-hot keys for cat, dog and mat, and their values.

    Returns:
        (keys [3, 3], values [3, 3]): key i is the i-th unit vector; value rows are cat, dog, mat.
    """
    keys = torch.eye(3)
    values = torch.tensor([[0.2, 0.8, 0.1], [0.3, 0.7, 0.2], [0.1, 0.1, 0.9]])
    return keys, values


def maps_of_five_mechanisms() -> list[torch.Tensor]:
    """Notebook 02's maps to read: five [6, 6] attention maps over six tokens, one per mechanism, as the example
    shows them (A to E). The notebook shows them in the student's order (``QuestionValues.arrange``), so its
    page never says which mechanism a map comes from.
    """
    generator = torch.Generator().manual_seed(2)
    vectors = 0.45 * torch.randn(7, 16, generator=generator)
    onehot = torch.eye(6)
    marker = torch.zeros(6, 1)
    marker[0] = 3.0
    pairs = [  # (queries, keys)
        (torch.cat([vectors[:6], torch.ones(6, 1)], dim=-1), torch.cat([vectors[:6], marker], dim=-1)),  # a sink token
        (vectors[:6], vectors[:6]),  # each token its own vector
        (vectors[[0, 1, 2, 3, 0, 4]], vectors[[0, 1, 2, 3, 0, 4]]),  # tokens 0 and 4 share one embedding
        (vectors[6].expand(6, 16), 3 * vectors[:6]),  # every query the same
        (4 * onehot[[0, 0, 1, 2, 3, 4]], onehot),  # each query looks at the previous token
    ]
    return [torch.softmax(queries @ keys.T, dim=-1) for queries, keys in pairs]


def maps_at_three_scales(d_k: int = 64) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Notebook 03's maps to read: the same 6 queries and 8 keys (unit-variance entries) under softmax(Q K^T * s)
    for three scales s, as the example shows them (A to C).

    Returns:
        (Q [6, d_k], K [8, d_k], the three [6, 8] maps).
    """
    generator = torch.Generator().manual_seed(5)
    queries, keys = torch.randn(6, d_k, generator=generator), torch.randn(8, d_k, generator=generator)
    scales = (d_k**-0.5, 1.0, 1.0 / d_k)
    return queries, keys, [torch.softmax(queries @ keys.T * scale, dim=-1) for scale in scales]
