"""What student code must not touch is declared by the module that holds it, and the review flag follows the declaration."""

from __future__ import annotations

import ast
import dataclasses
import re

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode

from autograder.grading.admission import introspection, review_flags
from autograder.settings import REPO_ROOT
from course_utils import guards, kernels, operators
from course_utils.guards import Guards, declared, missing_names


def notebook(*sources: str) -> NotebookNode:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])


def flagged(*lines: str) -> list[str]:
    """The lines review_flags names, each added by the student in a cell of its own."""
    flags = review_flags(notebook(*lines), notebook("import torch"))
    return [ast.literal_eval(flag.partition(": ")[2]) for flag in flags]


def test_every_declared_name_exists_in_its_module() -> None:
    assert missing_names() == [], "rename these in the module's GUARDS too, or the review no longer flags them"
    assert all(isinstance(g, Guards) for g in declared().values())


def test_every_module_that_declares_guards_is_gathered() -> None:
    # A GUARDS that course_utils.guards.OWNERS does not list would guard nothing.
    declaring = {
        f"{package}.{p.stem}"
        for package in ("autograder", "course_utils")
        for p in (REPO_ROOT / package).glob("*.py")
        if re.search(r"^GUARDS\b", p.read_text(), re.M)
    }
    assert declaring == set(guards.OWNERS)


def test_a_renamed_guarded_name_is_named_in_the_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    # The attribute renamed, the declaration not: the check names what is gone, once.
    monkeypatch.setattr(operators, "STAND_IN_SPAN", operators.STAND_IN_RANGE, raising=False)
    monkeypatch.delattr(operators, "STAND_IN_RANGE")
    assert missing_names() == ["course_utils.operators.STAND_IN_RANGE"]
    monkeypatch.setattr(operators, "STAND_IN_RANGE", 3, raising=False)
    assert missing_names() == ["course_utils.operators.STAND_IN_RANGE (not a string)"]


def test_the_review_flag_follows_a_renamed_name(monkeypatch: pytest.MonkeyPatch) -> None:
    line = "course_utils.operators._shields_opened[0] += 1"
    assert flagged(line, "span = ops.STAND_IN_RANGE", "span = ops.STAND_IN_SPAN") == [line, "span = ops.STAND_IN_RANGE"]
    monkeypatch.setattr(operators, "STAND_IN_SPAN", operators.STAND_IN_RANGE, raising=False)
    monkeypatch.setattr(operators, "GUARDS", dataclasses.replace(operators.GUARDS, names=("STAND_IN_SPAN", "_shields_opened")))
    assert missing_names() == []
    assert flagged("span = ops.STAND_IN_SPAN", "span = ops.STAND_IN_RANGE") == ["span = ops.STAND_IN_SPAN"]


def test_the_review_flag_follows_a_renamed_range(monkeypatch: pytest.MonkeyPatch) -> None:
    # The stand-ins' profiler range is guarded by its text, so a new text is flagged and the old one is not.
    assert flagged("name = 'course_utils.stand_in'", "import course_utils.stand_ins") == ["name = 'course_utils.stand_in'"]
    monkeypatch.setattr(operators, "STAND_IN_RANGE", "course_utils.shield")
    assert flagged("name = 'course_utils.shield'", "name = 'course_utils.stand_in'") == ["name = 'course_utils.shield'"]


def test_the_review_flag_follows_a_renamed_build_function(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rebinding is flagged, under any name for the module; calling is not.
    assert flagged("k.run_builds = fake", "vars(k)['run_builds'] = fake", "builds = run_builds(jobs)") == [
        "k.run_builds = fake",
        "vars(k)['run_builds'] = fake",
    ]
    monkeypatch.setattr(kernels, "compile_all", kernels.run_builds, raising=False)
    monkeypatch.setattr(kernels, "GUARDS", Guards(rebinding=("compile_all",)))
    assert flagged("k.compile_all = fake", "k.run_builds = fake", "compile_all(jobs)") == ["k.compile_all = fake"]


def test_a_guarded_module_is_flagged_however_it_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    imports = [
        "from course_utils import operators",
        "import course_utils.operators as ops",
        "from autograder.solutions import load_solution",
    ]
    assert flagged(*imports, "from course_utils.operators import aten_operators") == [
        *imports,
        "from course_utils.operators import aten_operators",
    ]
    assert flagged("from course_utils import kernels", "from course_utils.stand_ins import scores_logsumexp") == []
    monkeypatch.setattr(operators, "GUARDS", dataclasses.replace(operators.GUARDS, module=False))
    assert flagged(*imports) == imports[2:]


def test_handing_in_the_courses_own_pytorch_version_is_flagged() -> None:
    # A graded function bound to the course's stand-in passes its tests: a person must see the line.
    lines = [
        "from course_utils import torch_causal_mask as causal_mask",
        "import course_utils\nsoftmax = course_utils.SOFTMAX_STAND_IN['softmax']",
        "from course_utils.model_stand_ins import ReferenceBlock as DecoderBlock",
    ]
    assert flagged(*lines, "from course_utils import heatmap") == [lines[0], "softmax = course_utils.SOFTMAX_STAND_IN['softmax']", lines[2]]


def test_review_flags_only_lines_the_student_added_outside_test_cells() -> None:
    released = notebook("x = 1")
    submitted = notebook("x = 1", "import inspect")
    test_cell = nbformat.v4.new_code_cell("import inspect", metadata={"nbgrader": {"grade": True, "grade_id": "test_x", "points": 1}})
    submitted.cells.append(test_cell)  # the instructor's: nbgrader restores it from the source
    assert review_flags(submitted, released) == ["cell 2: 'import inspect'"]
    assert review_flags(submitted, notebook("import inspect")) == [], "a line the release already has"


def test_the_pattern_is_also_a_module_attribute() -> None:
    from autograder.grading.admission import INTROSPECTION

    assert INTROSPECTION is introspection()


def test_the_ways_around_the_autograd_watch_are_flagged_by_name() -> None:
    # course_utils.tripwires.autograd_refused judges by what ran; these lines are how code would hide it.
    lines = [
        "with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):",
        "engine = torch._C._ImperativeEngine()",
        "torch.autograd.Variable._execution_engine.run_backward((out,), (g,), False, False, (S,))",
    ]
    assert flagged(*lines, "torch.autograd.grad(out, S, g)") == lines  # autograd itself is graded by the watch, not flagged
