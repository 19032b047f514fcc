"""Scratch loader for the proposed 08 showcase cells: notebook 08's solution module plus cells/02 and cells/03.

    import sys; sys.path.insert(0, "benchmarks/drafts/fast_backward"); from load_cells import load; m = load()

The cells run in a copy of 08's solution namespace (its imports and solution cells: flash_attention_triton,
flash_attention_backward_triton, as_heads, launch, tl, triton, KERNELS_NATIVE), as they would in the notebook.
Each cell is compiled under its own file name, so Triton (and course_utils.kernels.kernel_source) can read
the kernels' source.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported

REPO = Path(os.environ.get("COURSE_REPO", "/work/main"))
CELLS = Path(os.environ.get("FAST_BACKWARD_CELLS", Path(__file__).resolve().parent / "cells"))
CODE_CELLS = ("02_flash_attention_backward_fast.py", "03_FlashAttentionFast.py")

_loaded: types.ModuleType | None = None


def load() -> types.ModuleType:
    """Returns: a module holding 08's solution names and the showcase's (loaded once)."""
    global _loaded
    if _loaded is None:
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        os.environ.setdefault("COURSE_SOLUTIONS_DIR", str(REPO / "solutions"))
        from autograder.solutions import load_solution

        base = load_solution("08_flash_backward")
        module = types.ModuleType("fast_backward_cells")
        module.__dict__.update({k: v for k, v in vars(base).items() if not k.startswith("__")})
        module.__file__ = str(CELLS / CODE_CELLS[0])
        sys.modules[module.__name__] = module
        for name in CODE_CELLS:
            path = CELLS / name
            exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102 - our own cells
        _loaded = module
    return _loaded
