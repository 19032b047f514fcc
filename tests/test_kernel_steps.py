"""Naming the step of a tiled computation that goes wrong: the first rung of a ladder of inputs that fails."""

from __future__ import annotations

import torch

from course_utils.kernel_steps import Step, where_steps_differ


def _row_sums(x: torch.Tensor, block: int) -> torch.Tensor:
    """Sums of each row, a block of columns at a time (the right answer)."""
    return torch.stack([x[:, i : i + block].sum(dim=-1) for i in range(0, x.shape[-1], block)]).sum(dim=0)


def _keeps_the_last_block(x: torch.Tensor, block: int) -> torch.Tensor:
    """A carried-sum bug: each block overwrites the total instead of adding to it."""
    total = torch.zeros(x.shape[0])
    for i in range(0, x.shape[-1], block):
        total = x[:, i : i + block].sum(dim=-1)
    return total


def _drops_the_ragged_block(x: torch.Tensor, block: int) -> torch.Tensor:
    """A mask bug: the last block is left out when it is short."""
    return _row_sums(x[:, : x.shape[-1] // block * block], block)


LADDER = [
    Step("the sum within one block", "one block of 8 columns", (torch.arange(16.0).reshape(2, 8), 8)),
    Step("carrying the sum from one block to the next", "three blocks of 8 columns", (torch.arange(48.0).reshape(2, 24), 8)),
    Step("the ragged last block", "20 columns in blocks of 8", (torch.arange(40.0).reshape(2, 20), 8)),
]


def test_the_first_rung_that_fails_names_the_step_and_the_rungs_that_matched() -> None:
    carried = where_steps_differ(_keeps_the_last_block, _row_sums, LADDER)
    assert carried.startswith("the first step that goes wrong is carrying the sum from one block to the next, on three blocks"), carried
    assert "the simpler inputs before it match (one block of 8 columns)" in carried, carried
    ragged = where_steps_differ(_drops_the_ragged_block, _row_sums, LADDER)
    assert "is the ragged last block, on 20 columns in blocks of 8" in ragged, ragged
    assert "one block of 8 columns; three blocks of 8 columns" in ragged, ragged


def test_a_right_answer_names_no_step_and_an_error_is_reported_as_raised() -> None:
    assert where_steps_differ(_row_sums, _row_sums, LADDER) == ""

    def fails_past_one_block(x: torch.Tensor, block: int) -> torch.Tensor:
        if x.shape[-1] > block:
            raise IndexError("block index out of range")
        return _row_sums(x, block)

    said = where_steps_differ(fails_past_one_block, _row_sums, LADDER)
    assert "is carrying the sum from one block to the next" in said and "raised IndexError: block index out of range" in said, said


def test_a_reference_that_names_its_results_has_a_difference_told_by_that_name() -> None:
    def both(x: torch.Tensor, block: int) -> dict[str, torch.Tensor]:
        return {"total": _row_sums(x, block), "first column": x[:, 0]}

    def wrong_first_column(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
        return _row_sums(x, block), x[:, 1]

    said = where_steps_differ(wrong_first_column, both, LADDER[:1])
    assert "one block of 8 columns: first column: " in said, said
