"""autograder.solutions: hidden tests load the solution code, and the solutions agree with PyTorch."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder import solutions as reference
from course_utils.checks import random_tensor

NB01 = "01_soft_dictionary_lookup"


@pytest.fixture(scope="module")
def solution01(repo_root):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(reference.SOLUTIONS_ENV_VAR, str(repo_root / "solutions"))
        return reference.load_solution(NB01)


def test_load_solution_gives_the_graded_functions(solution01) -> None:
    for name in ("hard_lookup", "softmax", "soft_lookup", "attention_entropy"):
        assert callable(getattr(solution01, name))
    assert not hasattr(solution01, "SoftDictionary")  # demo code is not part of the reference


def test_solutions_dir_is_found_from_inside_the_repository(monkeypatch: pytest.MonkeyPatch, repo_root) -> None:
    monkeypatch.delenv(reference.SOLUTIONS_ENV_VAR, raising=False)
    monkeypatch.chdir(repo_root / "solutions" / NB01)
    assert reference.solutions_dir() == repo_root / "solutions"


def test_missing_solutions_give_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv(reference.SOLUTIONS_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="Hidden tests need the instructor's solutions/ folder"):
        reference.solutions_dir()
    monkeypatch.setenv(reference.SOLUTIONS_ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no solution notebook for '99_nothing'"):
        reference.load_solution("99_nothing")


def test_top_level_imports_skip_magics_and_broken_cells() -> None:
    notebook = {
        "cells": [
            {"cell_type": "code", "source": "%matplotlib inline\nimport math\nx = 1"},
            {"cell_type": "code", "source": "def broken(:\n"},
            {"cell_type": "code", "source": ["from torch import nn\n", "import math\n"]},
            {"cell_type": "markdown", "source": "import os"},
        ]
    }
    assert reference.top_level_imports(notebook) == "import math\nfrom torch import nn"


# The solutions themselves, on varied inputs (hypothesis), against PyTorch.
shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 10_000), scale=st.floats(0.01, 100.0), temperature=st.floats(0.05, 20.0), data=st.data())
def test_solution_softmax_matches_torch(solution01, shape, seed, scale, temperature, data) -> None:
    x = random_tensor(*shape, dtype=torch.float64, seed=seed, scale=scale)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    torch.testing.assert_close(solution01.softmax(x, dim=dim, temperature=temperature), torch.softmax(x / temperature, dim=dim))


@settings(max_examples=30, deadline=None)
@given(
    batch=st.lists(st.integers(1, 3), max_size=2), n=st.integers(1, 6), d=st.integers(1, 5), d_v=st.integers(1, 5), seed=st.integers(0, 999)
)
def test_solution_soft_lookup_matches_torch(solution01, batch, n, d, d_v, seed) -> None:
    q, k, v = (random_tensor(*s, dtype=torch.float64, seed=seed + i) for i, s in enumerate(((*batch, d), (n, d), (n, d_v))))
    output, weights = solution01.soft_lookup(q, k, v, temperature=0.7)
    expected = torch.softmax(q @ k.T / 0.7, dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(output, expected @ v)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 8), seed=st.integers(0, 999), zeros=st.integers(0, 7))
def test_solution_entropy_matches_categorical(solution01, n, seed, zeros) -> None:
    scores = random_tensor(4, n, dtype=torch.float64, seed=seed)
    scores[:, 1 : 1 + zeros] = float("-inf")  # exact zero weights; column 0 stays finite
    w = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(solution01.attention_entropy(w), torch.distributions.Categorical(probs=w).entropy())


def test_solution_entropy_bounds(solution01) -> None:
    assert solution01.attention_entropy(torch.eye(4)).eq(0).all()
    torch.testing.assert_close(solution01.attention_entropy(torch.full((5,), 0.2)), torch.tensor(math.log(5)))


def test_loaded_solutions_keep_their_source(solution01) -> None:
    # triton.jit and tracebacks read a function's source lines; exec'd code has none unless registered.
    source = inspect.getsource(solution01.softmax)
    assert source.lstrip().startswith("def softmax(")
    assert "return" in source
