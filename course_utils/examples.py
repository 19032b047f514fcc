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
