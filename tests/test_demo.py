"""The demo command: a made-up class graded end to end, as an instructor first tries the grader.

Apart from the graded class of test_grading.py (its own slow fixture), so that another worker runs it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from autograder.demo import DEMO_ASSIGNMENTS, DEMO_MISTAKES
from autograder.demo import build_class as build_demo_class
from autograder.grading.models import AssignmentSpec
from autograder.mistakes import MISTAKES
from autograder.settings import SOLUTIONS_DIR

pytestmark = pytest.mark.slow


def test_quick_demo_prints_the_score_table(repo_root) -> None:
    # `demo --quick` grades notebook 01's class end to end; the next test covers what the full demo adds.
    result = subprocess.run(
        [sys.executable, "-m", "autograder", "demo", "--quick"], cwd=repo_root, capture_output=True, text=True, timeout=400
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    first = DEMO_ASSIGNMENTS[0]
    total = AssignmentSpec.load(SOLUTIONS_DIR, first).max_score
    rows = [line for line in lines if f" {first} " in line]
    assert any(line.startswith("solved ") and f"{total:g} / {total:g}" in line and line.rstrip().endswith("graded") for line in rows), (
        result.stdout
    )
    assert any(line.startswith("untouched ") and f"0 / {total:g}" in line for line in rows), result.stdout
    assert sum("lost points on" in line for line in rows) == len(DEMO_MISTAKES[first]), result.stdout
    assert not any(f" {name} " in line for line in lines for name in DEMO_ASSIGNMENTS[1:]), "--quick grades notebook 01 only"


def test_the_full_demo_hands_in_catalogued_mistakes(tmp_path) -> None:
    # The full demo adds notebooks 08 and 09. Each of their mistakes is a catalogued variant, so the graded class
    # (test_mistake_loses_points_on_the_test_that_names_it) shows the demo row it gives, without grading them twice.
    assert DEMO_ASSIGNMENTS == ("01_soft_dictionary_lookup", "08_flash_backward", "09_language_model")  # first, kernels, last
    roster = build_demo_class(tmp_path, DEMO_ASSIGNMENTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(roster)
    for assignment, names in DEMO_MISTAKES.items():
        catalogue = {m.name: m for m in MISTAKES[assignment]}
        assert set(names) <= set(catalogue), set(names) - set(catalogue)
        for student in roster:
            assert (tmp_path / student / f"{assignment}.ipynb").is_file()
    # ben's 08 kernel runs in the interpreter, but only the hidden compile check sees that no GPU builds it.
    [broken] = [m for m in MISTAKES[DEMO_ASSIGNMENTS[1]] if m.name == DEMO_MISTAKES[DEMO_ASSIGNMENTS[1]][1]]
    assert broken.loses == ("test_flash_attention_backward_triton",)
