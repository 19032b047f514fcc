"""The course's own answers (stand-ins and references) cannot stand in for the graded function itself.

In the notebook that grades a piece, a test of that piece fails when the student's code ran the course's
PyTorch version of it, whatever route reached it; a test that stands it in for another function, and a later
notebook that carries the piece with it, are unaffected. Most routes are shown on the record and replay
themselves (in process, quick); the slow tests grade whole notebooks sealed, as a submission is graded.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Iterator

import nbformat
import pytest
import torch

from autograder.mistakes import Variant
from autograder.settings import SOLUTIONS_DIR
from autograder.submissions import solved
from course_utils import recording
from course_utils.comparisons import CheckFailed
from course_utils.notebook_cells import assignment_notebook, defined_names, is_solution_cell, nbgrader_meta, solution_cells
from course_utils.stand_ins import CAUSAL_MASK_STAND_IN, torch_causal_mask
from course_utils.tripwires import ANSWERS, Answers

# Ways a student's notebook 04 can reach the course's causal mask: each must cost the causal_mask tests.
ROUTES = {
    "alias": "from course_utils import torch_causal_mask as causal_mask",
    "a name built at run time": 'import course_utils\ncausal_mask = getattr(course_utils, "torch_" + "causal_mask")',
    "a wrapper": (
        "import course_utils.stand_ins as _s\n"
        "def causal_mask(T_q, T_k, bottom_right=False, device=None):\n"
        "    return getattr(_s, 'torch_causal' + '_mask')(T_q, T_k, bottom_right, device)"
    ),
    "a module's __getattr__": (
        "import types, importlib\n"
        "_m = types.ModuleType('helpers')\n"
        "_m.__getattr__ = lambda name: getattr(importlib.import_module('course_utils'), 'torch_' + name)\n"
        "def causal_mask(T_q, T_k, bottom_right=False, device=None):\n"
        "    return _m.causal_mask(T_q, T_k, bottom_right=bottom_right, device=device)"
    ),
    "a class's bound method": (
        "from course_utils import stand_ins\n"
        "class Masks:\n"
        "    make = staticmethod(stand_ins.torch_causal_mask)\n"
        "    def causal(self, *args, **kwargs):\n"
        "        return self.make(*args, **kwargs)\n"
        "causal_mask = Masks().causal"
    ),
    "a copy of its code": (
        "import types\n"
        "from course_utils import torch_causal_mask as _t\n"
        "causal_mask = types.FunctionType(_t.__code__, _t.__globals__, 'causal_mask', _t.__defaults__)"
    ),
    "an error swallowed": (
        "import torch\n"
        "from course_utils import torch_causal_mask\n"
        "def causal_mask(T_q, T_k, bottom_right=False, device=None):\n"
        "    try:\n"
        "        torch_causal_mask(T_q, T_k)\n"
        "    except Exception:\n"
        "        pass\n"
        "    return torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q if bottom_right else 0)"
    ),
}
OWN_MASK = (
    "import torch\n"
    "def causal_mask(T_q, T_k, bottom_right=False, device=None):\n"
    "    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(T_k - T_q if bottom_right else 0)"
)
SDPA = (
    "import torch\n"
    "def scaled_dot_product_attention(Q, K, V, is_causal=False):\n"
    "    scores = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5\n"
    "    if is_causal:\n"
    "        scores = scores.masked_fill(~causal_mask(Q.shape[-2], K.shape[-2]), float('-inf'))\n"
    "    return torch.softmax(scores, dim=-1) @ V"
)


@contextlib.contextmanager
def recorded_into(path: Path, graded: list[str], namespace: dict) -> Iterator[None]:
    """Record as the sealed run does while the block runs, then live again (as tests/test_checks.py does)."""
    with recording.replaying({}):
        recording.start_recording(str(path), graded, namespace)
        yield
    assert recording.mode() is recording.Mode.LIVE


def record_and_replay(tmp_path: Path, notebook: str, graded: list[str], test: str) -> dict:
    """Run ``test`` against ``notebook``'s code as the sealed run does, then against the record as the trusted
    pass does; returns the replay's namespace after the test ran (it raises what the test's checks raise)."""
    from course_utils import checks

    namespace: dict = {"__name__": "__main__", "torch": torch}
    exec(notebook, namespace)  # noqa: S102 - the test's own notebook code
    helpers = {name: getattr(checks, name) for name in ("call", "check_equal", "peak_tensor_bytes")} | {
        "CAUSAL_MASK_STAND_IN": CAUSAL_MASK_STAND_IN
    }
    namespace.update(helpers)
    with recorded_into(tmp_path / "record", graded, namespace):
        recording.begin_cell("test_x")
        with contextlib.suppress(Exception):  # a cell that raises stops there, as in the sealed run
            exec(test, namespace)  # noqa: S102 - the sealed run compares nothing
    events = recording.read_record((tmp_path / "record").read_bytes())
    replay = {"__name__": "__main__", "torch": torch, **helpers, **{name: recording.Placeholder(name) for name in graded}}
    with recording.replaying(events):
        recording.begin_cell("test_x")
        exec(test, replay)  # noqa: S102
    return replay


@pytest.mark.parametrize("route", ROUTES)
def test_reaching_the_course_mask_in_any_way_fails_the_mask_test(tmp_path: Path, route: str) -> None:
    test = "assert check_equal(call(causal_mask, 3, 4), torch.ones(3, 4, dtype=torch.bool).tril(), label='mask')"
    with pytest.raises(CheckFailed) as failed:
        record_and_replay(tmp_path, ROUTES[route], ["causal_mask"], "import torch\n" + test)
    assert "ran torch_causal_mask (course_utils.stand_ins), the course's own PyTorch version of causal_mask" in failed.value.problem
    assert failed.value.hint.startswith("write it yourself")
    assert torch_causal_mask(2, 3).tolist() == [[True, False, False], [True, True, False]], "the stand-in is itself again"


def test_the_masked_attention_test_stands_the_course_mask_in_and_keeps_its_points(tmp_path: Path) -> None:
    # The test passes the mask stand-in on purpose: only the stand-in of the function under test is refused.
    test = (
        "q = torch.randn(4, 8)\n"
        "out = call(scaled_dot_product_attention, q, q, q, is_causal=True, stand_ins=CAUSAL_MASK_STAND_IN)\n"
        "assert out.shape == (4, 8)\n"
    )
    record_and_replay(tmp_path, SDPA + "\n" + ROUTES["alias"], ["causal_mask", "scaled_dot_product_attention"], test)


def test_a_stand_in_a_test_chose_may_run_the_course_answer_inside(tmp_path: Path) -> None:
    # 08's flash_attention tests stand in a backward that runs sdpa_gradients, which answers flash_attention itself.
    notebook = "def flash_attention(Q, K, V, dO):\n    return flash_attention_backward(Q, K, V, dO)[0]\n"
    stand_in = "from course_utils.checks import sdpa_gradients\nSTAND_IN = {'flash_attention_backward': sdpa_gradients}\n"
    test = stand_in + "x = torch.randn(1, 2, 5, 4)\nassert call(flash_attention, x, x, x, x, stand_ins=STAND_IN).shape == x.shape\n"
    record_and_replay(tmp_path, notebook, ["flash_attention"], test)
    own = "from course_utils.checks import sdpa_gradients as grads\n" + notebook.replace("flash_attention_backward(", "grads(")
    with pytest.raises(CheckFailed, match=r"ran sdpa_gradients \(course_utils.autograd_refs\)"):
        record_and_replay(tmp_path, own, ["flash_attention"], test)  # run by the student's own code: refused


def test_a_block_built_on_the_reference_block_fails_on_its_calls(tmp_path: Path) -> None:
    # The object a graded class made is tested under that class's name: its forward is the reference's.
    notebook = "from course_utils import ReferenceBlock\nclass DecoderBlock(ReferenceBlock):\n    pass\n"
    test = (
        "block = call(DecoderBlock, 8, 2)\n"  # making it runs no answer: ReferenceBlock.__init__ is not declared
        "block = call(block, torch.randn(1, 3, 8))\n"
    )
    with pytest.raises(CheckFailed, match=r"ran ReferenceBlock.forward \(course_utils.model_stand_ins\), .* of DecoderBlock"):
        record_and_replay(tmp_path, notebook, ["DecoderBlock"], test)


def test_a_measurement_of_the_course_mask_fails_too(tmp_path: Path) -> None:
    # A measurement reaches student code through call, as every test's does.
    with pytest.raises(CheckFailed, match="ran torch_causal_mask"):
        record_and_replay(tmp_path, ROUTES["alias"], ["causal_mask"], "peak_tensor_bytes(call, causal_mask, 64, 64)\n")


def test_the_students_own_mask_and_the_live_notebook_are_untouched(tmp_path: Path) -> None:
    test = "assert check_equal(call(causal_mask, 3, 4), torch.ones(3, 4, dtype=torch.bool).tril(), label='mask')"
    record_and_replay(tmp_path, OWN_MASK, ["causal_mask"], "import torch\n" + test)
    from course_utils.checks import call

    assert call(torch_causal_mask, 2, 2).tolist() == [[True, False], [True, True]]  # a student's own notebook runs it


def graded_here(notebook: str) -> set[str]:
    """What a notebook's own solution cells grade (carried and showcase cells left out)."""
    source = json.loads(assignment_notebook(SOLUTIONS_DIR, notebook).read_text(encoding="utf-8"))
    own = [c for c in source["cells"] if is_solution_cell(c) and not {"carried", "showcase"} & set(c["metadata"].get("tags", []))]
    return set().union(*(defined_names("".join(c["source"])) for c in own))


def test_each_declaration_names_functions_its_notebook_grades_and_every_notebook_that_grades_them() -> None:
    import course_utils.autograd_refs  # noqa: F401 - every module that declares answers
    import course_utils.model_stand_ins  # noqa: F401

    notebooks = sorted(p.name for p in SOLUTIONS_DIR.iterdir() if p.is_dir() and p.name[:2].isdigit())
    grades = {notebook: graded_here(notebook) for notebook in notebooks}
    for fn, declared in ANSWERS.items():
        for answer in declared:
            assert isinstance(answer, Answers) and set(answer.functions) <= grades[answer.notebook], (fn, answer)
        # The tripwire keys on the name under test: every notebook that grades that name must be declared.
        names = {name for answer in declared for name in answer.functions}
        for name in names:
            expected = {nb for nb, graded in grades.items() if name in graded}
            assert expected <= {a.notebook for a in declared if name in a.functions}, (fn.__qualname__, name, expected)


def test_every_stand_in_table_entry_is_declared_for_the_name_it_stands_in_for() -> None:
    from course_utils import model_stand_ins, stand_ins

    tables = {
        name: value
        for module in (stand_ins, model_stand_ins)
        for name, value in vars(module).items()
        if name.endswith(("_STAND_IN", "_STAND_INS"))
    }
    for table, entries in tables.items():
        for name, fn in entries.items():
            declared = ANSWERS.get(fn.forward if isinstance(fn, type) else fn, ())
            assert any(name in answer.functions for answer in declared), f"{table}[{name!r}] declares no answer to {name}"


# --- whole notebooks, sealed and replayed as a submission is graded -------------------------------------


def grade_sealed(assignment: str, variants: list[Variant]) -> dict[str, bool]:
    """Each test cell's verdict (passed or not) for the solution with ``variants``, graded as SealedExecute does:
    the submission (its test cells as the grader's source has them) run sealed, the tests replayed against it."""
    from autograder.grading.sandbox import SandboxLimits, compiler_sealing, run_sealed
    from autograder.grading.verdicts import decide, graded_names
    from autograder.nbgrader_ext.sealed_execute import stopped_reasons

    source = nbformat.read(assignment_notebook(SOLUTIONS_DIR, assignment), as_version=4)
    notebook = solved(assignment, variants)
    tests = {nbgrader_meta(c)["grade_id"]: c.source for c in source.cells if nbgrader_meta(c).get("grade") and not is_solution_cell(c)}
    for cell in notebook.cells:  # nbgrader's OverwriteCells: the hidden tests come back
        cell.source = tests.get(nbgrader_meta(cell).get("grade_id", ""), cell.source)
    run = run_sealed(notebook, graded_names(source), SandboxLimits(cell_timeout=60, memory_bytes=None, wall_seconds=600))
    verdicts = decide(
        source, bytes(run.record), stopped_reasons(notebook, run), assignment, submission=notebook, compiler=compiler_sealing(True)
    )
    return {test: verdict.passed for test, verdict in verdicts.items()}


def needs_sandbox() -> None:
    from autograder.grading.sandbox import sandbox_problem

    if sandbox_problem() is not None:
        pytest.skip(f"no sandbox here: {sandbox_problem()}")


MASK_TESTS = {"test_causal_mask_top_left", "test_causal_mask_bottom_right", "test_causal_mask_unequal_lengths", "test_causal_mask_device"}


@pytest.mark.slow
@pytest.mark.parametrize("route", ["alias", "a wrapper"])
def test_notebook_04_whose_mask_is_the_course_one_loses_the_mask_tests_only(route: str) -> None:
    needs_sandbox()
    verdicts = grade_sealed("04_masking", [Variant(route, "causal_mask", of=ROUTES[route] + "\n")])
    assert {test for test, passed in verdicts.items() if not passed} == MASK_TESTS  # the masked-SDPA tests stand it in


@pytest.mark.slow
def test_notebook_09_loses_rope_for_the_course_rope_and_nothing_for_carried_stand_ins() -> None:
    needs_sandbox()
    rope = solution_cells(nbformat.read(assignment_notebook(SOLUTIONS_DIR, "09_language_model"), as_version=4))["rope"]
    body = rope.split("### BEGIN SOLUTION")[1].split("    ### END SOLUTION")[0]
    variants = [
        Variant(
            "rope by the course",
            "rope",
            ((body, "\n    from course_utils import torch_rope\n\n    return torch_rope(x, positions, base)\n"),),
        ),
        # Carried pieces by the course's PyTorch versions, as a student whose own do not work is told to.
        Variant("mask", "causal_mask", of="from course_utils import torch_causal_mask as causal_mask\n"),
        Variant(
            "attention",
            "scaled_dot_product_attention",
            of="from course_utils import torch_masked_attention as scaled_dot_product_attention\n",
        ),
        Variant("heads", "split_heads", of="from course_utils import torch_split_heads as split_heads\n"),
    ]
    verdicts = grade_sealed("09_language_model", variants)
    assert {test for test, passed in verdicts.items() if not passed} == {"test_rope_halves_convention", "test_rope_relative_positions"}


# --- text copied from the course package: the class report lists it --------------------------------------


def test_the_class_report_lists_a_stand_in_copied_as_text_and_not_the_solution() -> None:
    import inspect

    from autograder.grading.class_report import ClassReport, render_html, similar_pairs
    from autograder.grading.models import Submission
    from course_utils.model_stand_ins import torch_rope

    rope = solution_cells(nbformat.read(assignment_notebook(SOLUTIONS_DIR, "09_language_model"), as_version=4))["rope"]
    body = rope.split("### BEGIN SOLUTION")[1].split("    ### END SOLUTION")[0]
    copied = inspect.getsource(torch_rope).split('"""')[2]  # torch_rope's body as the package has it
    submissions = [
        Submission(student, "09_language_model", nbformat.writes(solved("09_language_model", variants)).encode())
        for student, variants in (("wrote-it", []), ("copied-it", [Variant("torch_rope's text", "rope", ((body, copied),))]))
    ]
    similarity = similar_pairs(submissions, ["09_language_model"])
    assert [(c.student, c.answer) for c in similarity.copied] == [("copied-it", "torch_rope (course_utils.model_stand_ins)")]
    assert similarity.copied[0].share > 0.95 and any("rope_angles(positions, d, base)" in m for m in similarity.copied[0].matches)
    page = render_html(ClassReport(notebooks=[], misconceptions=[], similarity=similarity, problems=[]))
    assert "Copied from the course package" in page and "<td>copied-it</td>" in page


def test_no_test_calls_a_declared_name_where_it_is_only_carried() -> None:
    # The tripwire keys on the name under test; a notebook that only carries the piece never tests it.
    import ast

    declared = {name for found in ANSWERS.values() for answer in found for name in answer.functions}
    for folder in sorted(p for p in SOLUTIONS_DIR.iterdir() if p.is_dir() and p.name[:2].isdigit()):
        source = json.loads(assignment_notebook(SOLUTIONS_DIR, folder.name).read_text(encoding="utf-8"))
        carried = declared - graded_here(folder.name)
        for cell in source["cells"]:
            if nbgrader_meta(cell).get("grade") and not is_solution_cell(cell):
                names = {n.id for n in ast.walk(ast.parse("".join(cell["source"]))) if isinstance(n, ast.Name)}
                assert not names & carried, (folder.name, nbgrader_meta(cell)["grade_id"], names & carried)


LAUNCHER = (
    "def softmax_rows(x):\n"
    "    out = torch.empty_like(x)\n"
    "    softmax_row_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK=16)\n"
    "    return out\n"
)
ROWS_TEST = "x = torch.randn(3, 10)\nassert check_equal(call(softmax_rows, x{}), torch.softmax(x, dim=-1), label='rows')\n"


def test_a_launcher_that_launches_the_course_emulation_fails_its_test_and_the_launcher_test_keeps_it(tmp_path: Path) -> None:
    graded = ["softmax_row_kernel", "softmax_rows"]
    emulation = "from course_utils.emulated_kernels import SOFTMAX_ROW_KERNEL as softmax_row_kernel\n"
    with pytest.raises(CheckFailed) as failed:
        record_and_replay(tmp_path, emulation + LAUNCHER, graded, ROWS_TEST.format(""))
    assert "ran SoftmaxRowKernel.run (course_utils.emulated_kernels)" in failed.value.problem, failed.value.problem
    # The launcher's own test stands the emulation in for the kernel on purpose: there it runs.
    table = "from course_utils.emulated_kernels import SOFTMAX_ROW_KERNEL_STAND_IN\n"
    (tmp_path / "launcher").mkdir()
    record_and_replay(tmp_path / "launcher", LAUNCHER, graded, table + ROWS_TEST.format(", stand_ins=SOFTMAX_ROW_KERNEL_STAND_IN"))


def test_every_module_that_declares_answers_is_listed() -> None:
    # A module whose @answers ANSWER_MODULES does not list would be missed by the class report's copy check.
    from autograder.settings import REPO_ROOT
    from course_utils.tripwires import ANSWER_MODULES

    declaring = {
        f"course_utils.{p.stem}"
        for p in (REPO_ROOT / "course_utils").glob("*.py")
        if "\n@answers(" in p.read_text() or "    @answers(" in p.read_text()
    }
    assert declaring == set(ANSWER_MODULES)
