"""Helpers that the course notebooks import: setup, checks, plots, and the solution loader.

Light by design (torch, numpy, matplotlib), so a Colab notebook can pip-install it.
"""

from .runtime import (
    init,
    is_grading,
    needs,
    pick_device,
    seed_everything,
    single_thread,
)
from .selfcheck import check_my_work

__all__ = ["check_my_work", "init", "is_grading", "needs", "pick_device", "seed_everything", "single_thread"]
__version__ = "0.1.0"
