"""What instructors really receive: one fixture per kind of bad submission, with the grade and
the reason each must get. All are notebook 01, graded together by the ``bad_class`` fixture
with a short cell time limit and a small memory limit, so that the run stays quick.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from autograder.grading.models import AssignmentSpec
from autograder.mistakes import MISTAKES, Variant
from autograder.settings import SOLUTIONS_DIR
from autograder.submissions import solved

FIRST = "01_soft_dictionary_lookup"
BAD_CELL_TIMEOUT_S = 10
BAD_MEMORY_LIMIT = 2 * 2**30
# Every softmax test compares values (the hidden no-builtin test compares with the solution too).
SOFTMAX_TESTS = frozenset(
    {
        "test_softmax_matches_torch",
        "test_softmax_any_dim",
        "test_softmax_temperature",
        "test_softmax_stable",
        "test_softmax_neg_inf",
        "test_softmax_no_builtin",
    }
)


def _tests_before(assignment: str, cell: str) -> frozenset[str]:
    """The test cells above a solution cell: they have run when a crash in that cell ends the run."""
    ids = [c.get("id") for c in nbformat.read(SOLUTIONS_DIR / assignment / f"{assignment}.ipynb", as_version=4).cells]
    return frozenset(AssignmentSpec.load(SOLUTIONS_DIR, assignment).tests) & frozenset(ids[: ids.index(cell)])


TESTS_BEFORE_SOFTMAX = _tests_before(FIRST, "softmax")  # hard_lookup's, and the worked softmax question's
SOFTMAX_SIGNATURE = "def softmax(scores: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:"


@dataclass(frozen=True)
class BadCase:
    student: str
    write: Callable[[Path], None]  # writes the student's files into their folder
    score: str  # "zero", "full", "lost" (exactly ``lost`` lose points) or "at least" (``lost`` among others)
    status: str  # a regular expression the status must match (re.search)
    lost: frozenset[str] = frozenset()


def softmax_source() -> str:
    return next(c.source for c in solved(FIRST).cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")


def softmax_cell(body: str, base: str | None = None) -> Variant:
    """softmax's cell with ``body`` run after its definition (the correct one unless ``base``)."""
    return Variant("bad softmax cell", "softmax", of=(base or softmax_source()) + "\n\n" + body)


def notebook_file(notebook, name: str = f"{FIRST}.ipynb") -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, folder / name)

    return write


def text_file(text: str, name: str = f"{FIRST}.ipynb") -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")

    return write


def link_to(target: Path, name: str = f"{FIRST}.ipynb") -> Callable[[Path], None]:
    """A submission whose notebook is a symbolic link (to the instructor's solution, say)."""

    def write(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).symlink_to(target)

    return write


def stripped(notebook):
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
    return notebook


def malformed_metadata(notebook):
    """nbgrader metadata an editor (or a student) mangled: not a mapping, and a grade id that is a list."""
    solutions = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")]
    solutions[0].metadata["nbgrader"] = ["not", "a", "mapping"]
    solutions[1].metadata["nbgrader"]["grade_id"] = ["softmax"]
    return notebook


def without_test(notebook, grade_id: str):
    notebook.cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") != grade_id]
    return notebook


def with_test_replaced(notebook, grade_id: str, source: str):
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = source
    return notebook


def renamed_softmax():
    notebook = solved(FIRST)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "softmax":
            cell.source = cell.source.replace("def softmax(", "def soft_max(")
    return notebook


def with_forged_test_cell(notebook):
    """A test cell the release does not have, worth 100 points, that always passes."""
    forged = nbformat.v4.new_code_cell("# free points\nassert True")
    forged.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "test_bonus",
        "locked": True,
        "points": 100,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    notebook.cells.insert(5, forged)
    return notebook


# Markers of script that must never reach an instructor's browser from a student's notebook.
XSS_MARKERS = ("xss-markdown", "xss-handler", "xss-js", "xss-svg", "xss-link")


def with_html_injection(notebook):
    """Script in a markdown cell and in display outputs made while grading (5 ways in, each marked)."""
    markdown = nbformat.v4.new_markdown_cell(
        "My notes <img src=x onerror=\"alert('xss-markdown')\"> <script>alert('xss-markdown')</script>"
        " <a href=\"javascript:alert('xss-link')\">click</a>"
    )
    # The markers are built while the cell runs, so that only its outputs, never its shown code, hold them.
    shows = nbformat.v4.new_code_cell(
        "from IPython.display import HTML, SVG, Javascript, display\n"
        "m = lambda name: 'xss-' + name\n"
        "display(HTML('<b onmouseover=\"alert(' + repr(m('handler')) + ')\">hover</b>'))\n"
        "display(Javascript('alert(' + repr(m('js')) + ')'))\n"
        "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(' + repr(m('svg')) + ')\"></svg>'))"
    )
    notebook.cells[1:1] = [markdown, shows]
    return notebook


WRONG_SOFTMAX = next(m for m in MISTAKES[FIRST] if m.cell == "softmax" and m.loses[0] != "test_softmax_no_builtin")
assert WRONG_SOFTMAX.cell == "softmax", WRONG_SOFTMAX
NEVER_FAIL = "lambda *args, **kwargs: None"

BAD_CASES = [
    BadCase("not-json", text_file("this is not a notebook {"), "zero", r"^unreadable: not a valid notebook"),
    BadCase("json-not-notebook", text_file('{"hello": "world"}'), "zero", r"^unreadable: "),
    BadCase("empty-notebook", notebook_file(nbformat.v4.new_notebook()), "zero", r"^unreadable: the notebook has no cells$"),
    BadCase("only-a-pdf", text_file("%PDF-1.4", name="answers.pdf"), "zero", rf"^missing: no {FIRST}\.ipynb"),
    BadCase("html-injection", notebook_file(with_html_injection(solved(FIRST))), "full", r"^graded$"),
    BadCase(
        "link-to-solutions",  # a link is never followed: the solution it points to grades nothing
        link_to(SOLUTIONS_DIR / FIRST / f"{FIRST}.ipynb"),
        "zero",
        rf"^refused: '.*{FIRST}\.ipynb': a symbolic link, not a file: links are never followed$",
    ),
    BadCase("metadata-stripped", notebook_file(stripped(solved(FIRST))), "full", r"^graded; nbgrader metadata restored on \d+ cell\(s\)"),
    BadCase(
        "metadata-malformed",  # dropped as foreign, then restored by matching the cells to the release
        notebook_file(malformed_metadata(solved(FIRST))),
        "full",
        r"^graded; .*nbgrader metadata restored on 2 cell\(s\)",
    ),
    BadCase(
        "colab-copy", notebook_file(solved(FIRST), f"Copy of {FIRST}.ipynb"), "full", rf"^graded; received as 'Copy of {FIRST}\.ipynb'$"
    ),
    BadCase(
        "syntax-error",
        notebook_file(solved(FIRST, [Variant("syntax error", "softmax", of=SOFTMAX_SIGNATURE + "\n    return (scores")])),
        "lost",
        r"errors in your code: softmax raised SyntaxError",
        SOFTMAX_TESTS,
    ),
    BadCase(
        "function-renamed",
        notebook_file(renamed_softmax()),
        "lost",
        r"not defined anywhere \(renamed or deleted\?\): softmax",
        SOFTMAX_TESTS,
    ),
    BadCase(
        "forged-frame",  # writes a frame of its own to the sealed run's pipe: the run's result is not used
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        "import os as _os, struct as _struct\n"
                        "for _fd in range(3, 64):\n"
                        "    try:\n"
                        "        _os.write(_fd, b'E' + _struct.pack('<Q', 2) + b'[]')\n"
                        "    except OSError:\n"
                        "        pass"
                    )
                ],
            )
        ),
        "zero",
        r"^invalid result: its sealed run sent a b'E' frame: not a JSON object, outside the grading protocol",
    ),
    BadCase(
        "record-bomb",  # appends a frame of deflated zeros to its record: 16 MiB once inflated, from a few kilobytes
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        "import io as _io, os as _os, struct as _struct, zipfile as _zipfile\n"
                        "_saved, _packed = _io.BytesIO(), _io.BytesIO()\n"
                        "torch.save({'cell': 'test_softmax_stable', 'outcome': {'kind': 'value', 'value': torch.zeros(4 * 2**20)}}, _saved)\n"
                        "_archive = _zipfile.ZipFile(_io.BytesIO(_saved.getvalue()))\n"
                        "with _zipfile.ZipFile(_packed, 'w', compression=_zipfile.ZIP_DEFLATED) as _out:\n"
                        "    for _entry in _archive.infolist():\n"
                        "        _out.writestr(_entry.filename, _archive.read(_entry.filename))\n"
                        "with open(_os.environ['COURSE_RECORD_FILE'], 'ab') as _record:\n"
                        "    _record.write(_struct.pack('<Q', len(_packed.getvalue())) + _packed.getvalue())"
                    )
                ],
            )
        ),
        "zero",
        r"^invalid result: its sealed run sent a forged record \(a record frame holds a compressed entry",
    ),
    BadCase(
        "forged-test-cell",  # graded as before, out of the same total; the made-up cell counts for nothing
        notebook_file(with_forged_test_cell(solved(FIRST))),
        "full",
        r"^graded; cell\(s\) not in the released notebook run as ordinary cells: test_bonus$",
    ),
    BadCase(
        "test-deleted",
        notebook_file(without_test(solved(FIRST), "test_softmax_stable")),
        "full",
        r"^graded; deleted test cell\(s\) put back: test_softmax_stable$",
    ),
    BadCase(
        "test-edited-to-pass",
        notebook_file(with_test_replaced(solved(FIRST, [WRONG_SOFTMAX]), WRONG_SOFTMAX.loses[0], "assert True")),
        "lost",
        rf"edited test cell\(s\) restored: {WRONG_SOFTMAX.loses[0]}",
        frozenset(WRONG_SOFTMAX.loses),
    ),
    BadCase(
        "infinite-loop",
        notebook_file(solved(FIRST, [softmax_cell("while True:\n    pass")])),
        "full",
        rf"errors in your code: softmax ran past the {BAD_CELL_TIMEOUT_S} s limit and was stopped",
    ),
    BadCase(
        "os-exit",
        notebook_file(solved(FIRST, [softmax_cell("import os\nos._exit(1)")])),
        "lost",
        r"the notebook did not run to the end: the kernel died",
        frozenset(AssignmentSpec.load(SOLUTIONS_DIR, FIRST).tests) - TESTS_BEFORE_SOFTMAX,
    ),
    BadCase(
        "segfault",
        notebook_file(solved(FIRST, [softmax_cell("import ctypes\nctypes.string_at(0)")])),
        "lost",
        r"the notebook did not run to the end: the kernel died",
        frozenset(AssignmentSpec.load(SOLUTIONS_DIR, FIRST).tests) - TESTS_BEFORE_SOFTMAX,
    ),
    BadCase(
        "memory-blow-up",
        notebook_file(solved(FIRST, [softmax_cell("hoard = [b'x' * 10**8 for _ in range(200)]  # 20 GB")])),
        "full",
        r"errors in your code: softmax ran out of memory \(limit 2 GiB\)",
    ),
    BadCase(
        "huge-output",
        notebook_file(solved(FIRST, [softmax_cell("print('x' * 10_000_000)\nfor i in range(100_000):\n    print(i)")])),
        "full",
        r"printed output was cut",
    ),
    BadCase(
        "nan-outputs",
        notebook_file(solved(FIRST, [Variant("NaN", "softmax", of=SOFTMAX_SIGNATURE + "\n    return scores * float('nan')")])),
        "lost",
        r"^graded \(lost points on: test_softmax",
        SOFTMAX_TESTS,
    ),
    BadCase(
        "patches-assert-close",
        notebook_file(
            solved(FIRST, [WRONG_SOFTMAX, Variant("patch", "hard_lookup", of="import torch\ntorch.testing.assert_close = " + NEVER_FAIL)])
        ),
        "at least",  # the patch is flagged for review and changes nothing: the verdicts are decided elsewhere
        r"^review: introspection of the grader \(hard_lookup: 'torch\.testing\.assert_close =",
        frozenset(WRONG_SOFTMAX.loses),
    ),
    BadCase(
        # Obfuscated: flagged all the same, and the wrong softmax loses its points.
        "patches-assert-close-quietly",
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        "setattr(getattr(__import__('to' + 'rch'), 'testing'), 'assert_' + 'close', " + NEVER_FAIL + ")",
                        base=WRONG_SOFTMAX.apply(softmax_source()),
                    )
                ],
            )
        ),
        "at least",
        r"^review: introspection of the grader .*lost points on: ",
        frozenset(WRONG_SOFTMAX.loses),
    ),
    BadCase(
        "borrows-the-solution",
        notebook_file(
            solved(
                FIRST,
                [
                    Variant(
                        "borrow",
                        "softmax",
                        of=f"from autograder.solutions import load_solution\nsoftmax = load_solution({FIRST!r}).softmax",
                    )
                ],
            )
        ),
        "lost",  # the sealed run has no solutions to borrow: softmax gives nothing the tests accept
        r"^review: introspection of the grader \(softmax: .*load_solution",
        SOFTMAX_TESTS,
    ),
]

# Hostile submissions: each tries one attack on the grader. They are graded in the same run as
# the honest ones above, which must keep full marks. The ones that fake a function lose its points.
PROCESS_MARKER = "attention-course-hostile-sleeper"
# It keeps only the cells' sources (IPython files each cell as a file of its own in linecache), once each, so
# that the output limit cannot cut the hidden tests out of what it prints before the redactor sees them.
LEAK_STASH = (
    "import linecache\n_stash = {}\n_real_softmax = softmax\n\ndef softmax(*args, **kwargs):\n"
    "    for name, entry in list(linecache.cache.items()):\n"
    "        if ('ipykernel' in name or name.startswith('<')) and len(entry) == 4:\n"
    "            _stash[name] = ''.join(entry[2])\n"
    "    return _real_softmax(*args, **kwargs)"
)
HOSTILE_CASES = [
    BadCase(
        "deletes-grader-state",
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        "import glob, os, shutil\nfor path in glob.glob('/tmp/attention-*') + [os.environ.get('COURSE_SOLUTIONS_DIR', '/nonexistent')]:\n"
                        "    shutil.rmtree(path, ignore_errors=True)\nfor db in glob.glob('/tmp/**/gradebook.db', recursive=True):\n    open(db, 'w').write('broken')"
                    )
                ],
            )
        ),
        "full",
        r"^review: introspection of the grader \(softmax: .*COURSE_SOLUTIONS_DIR.*; graded$",
    ),
    BadCase(
        "writes-outside",
        notebook_file(solved(FIRST, [softmax_cell("open('/usr/attention-course-pwned', 'w').write('x')")])),
        "full",
        r"^sandbox violation: tried to write outside its scratch; graded",
    ),
    BadCase(
        "reads-other-submissions",
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        f"import os\nassert not os.path.exists({str(SOLUTIONS_DIR)!r}) and not os.path.exists({str(SOLUTIONS_DIR.parent / 'README.md')!r}), 'can see the host'"
                    )
                ],
            )
        ),
        "full",
        r"^graded$",
    ),
    BadCase(
        "opens-a-socket",
        notebook_file(solved(FIRST, [softmax_cell("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)")])),
        "full",
        r"^sandbox violation: tried to network; graded",
    ),
    BadCase(
        "forks-and-detaches",
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        f"import subprocess\nsubprocess.Popen(['bash', '-c', 'exec -a {PROCESS_MARKER} sleep 1000'], start_new_session=True)"
                    )
                ],
            )
        ),
        "full",
        r"^sandbox violation: tried to leave 1 process\(es\) running \(killed\); graded",
    ),
    BadCase(
        "rebinds-the-checkers",
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        "globals()['check_close'] = " + NEVER_FAIL + "\nglobals()['check_matches'] = " + NEVER_FAIL,
                        base=WRONG_SOFTMAX.apply(softmax_source()),
                    )
                ],
            )
        ),
        "at least",
        r"^review: introspection of the grader",
        frozenset(WRONG_SOFTMAX.loses),
    ),
    BadCase(
        "patches-the-checks-module",
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(
                        "import course_utils.checks as trusted\nsetattr(trusted, 'check_close', lambda *a, **k: True)\nsetattr(trusted, '_recording', lambda: True)",
                        base=WRONG_SOFTMAX.apply(softmax_source()),
                    )
                ],
            )
        ),
        "at least",
        r"^review: introspection of the grader",
        frozenset(WRONG_SOFTMAX.loses),
    ),
    BadCase(
        "calls-the-reference-obfuscated",
        notebook_file(
            solved(
                FIRST,
                [
                    Variant(
                        "obfuscated",
                        "softmax",
                        of=(
                            "import importlib\nsoftmax = getattr(importlib.import_module('course_utils.' + 'refer' + 'ence'), 'load_' + 'solution')"
                            f"({FIRST!r}).softmax"
                        ),
                    )
                ],
            )
        ),
        "lost",
        r"^review: introspection of the grader",
        SOFTMAX_TESTS,
    ),
    BadCase(
        "prints-hidden-tests",
        notebook_file(
            solved(
                FIRST,
                [
                    softmax_cell(LEAK_STASH),
                    Variant(
                        "print the stash",
                        "attention_entropy",
                        of=next(
                            c.source for c in solved(FIRST).cells if c.metadata.get("nbgrader", {}).get("grade_id") == "attention_entropy"
                        )
                        + "\nprint('\\n'.join(_stash.values()))",
                    ),
                ],
            )
        ),
        "full",
        r"^review: introspection of the grader",
    ),
    BadCase(
        "patches-showtraceback",
        notebook_file(
            solved(FIRST, [softmax_cell("get_ipython().showtraceback = lambda *a, **k: None", base=WRONG_SOFTMAX.apply(softmax_source()))])
        ),
        "at least",
        r"^review: introspection of the grader",
        frozenset(WRONG_SOFTMAX.loses),
    ),
    BadCase(
        "fills-the-disk",
        notebook_file(
            solved(FIRST, [softmax_cell("with open('/tmp/fill', 'wb') as f:\n    for _ in range(2048):\n        f.write(b'0' * 2**20)")])
        ),
        "full",
        r"^sandbox violation: tried to fill the disk; graded",
    ),
]
BAD_CASES += HOSTILE_CASES

# Folder names that are not valid student ids get their row too.
ODD_NAMES = {
    "star*": (notebook_file(solved(FIRST)), r"^invalid student name: 'star\*'"),
    "=1+2": (notebook_file(solved(FIRST)), r"^invalid student name: '=1\+2'"),  # a formula, if a spreadsheet ran it
}
# Valid ids that a spreadsheet would still read as formulas: graded as usual, quoted in every CSV.
FORMULA_NAMES = ("@SUM", "-cmd")


# The class list the bad class is graded with: everyone who handed in but OFF_ROSTER, and ABSENT, who handed in nothing.
ABSENT, OFF_ROSTER = "zz-absent", "metadata-malformed"


def write_bad_class_roster(folder: Path, path: Path) -> Path:
    """The roster of the class in ``folder`` as an LMS exports it: a CSV with a byte-order mark and more columns."""
    from autograder.grading.admission import SAFE_STUDENT_ID

    # An LMS lists only ids it accepts: the odd names (ODD_NAMES) are rows of their own kind, on no list.
    students = sorted({p.name for p in folder.iterdir() if SAFE_STUDENT_ID.match(p.name)} - {OFF_ROSTER} | {ABSENT})
    lines = ["Student,Full name"] + [f'"{student}",Someone' for student in students]
    path.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def build_bad_class(folder: Path) -> None:
    for case in BAD_CASES:
        case.write(folder / case.student)
    for student, (write, _) in ODD_NAMES.items():
        write(folder / student)
    for student in FORMULA_NAMES:
        notebook_file(solved(FIRST))(folder / student)
    # A student id with a space, whose notebook is fine.
    notebook_file(solved(FIRST))(folder / "ok student")
