"""The class report (class-report.html and .json) on hand-made rows and three tiny submissions, and in a browser."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import numpy as np
import pytest
from browser_page import chromium, needs_chromium
from helpers import results_of

from autograder.grading import class_report
from autograder.grading.class_report import (
    CLASS_REPORT_HTML,
    CLASS_REPORT_JSON,
    MIN_OVERLAP_TOKENS,
    SCHEMA_VERSION,
    SIMILARITY_THRESHOLD,
    build_class_report,
    clean_code_html,
    misconceptions,
    problems,
    render_html,
    report_json,
    similar_pairs,
    write_class_report,
)
from autograder.grading.models import AssignmentSpec, GradeRow, Kind, Lateness, Misconception, Outcome, Submission, TestRow
from autograder.grading.statistics import discrimination, notebook_stats

# --- a hand-made class ------------------------------------------------------------------------------------

A = AssignmentSpec("01_a", {"test_x": 2.0, "test_y": 2.0, "test_z": 1.0})
B = AssignmentSpec("02_b", {"test_w": 5.0})
SPECS = {"01_a": A, "02_b": B}
HOSTILE_ID = "<img src=x onerror=alert(1)>"
HOSTILE_STATUS = "</td><script>alert('status')</script>"

# (student, x, y, z) for 01_a, all graded
SCORES_A = [("ann", 2, 2, 1), ("bob", 2, 0, 1), ("cy", 0, 0, 1), ("dee", 2, 1, 1), (HOSTILE_ID, 0, 2, 1)]
GRADES = [GradeRow(s, "01_a", float(x + y + z), 5.0, Outcome(Kind.GRADED)) for s, x, y, z in SCORES_A] + [
    GradeRow("ann", "02_b", 5.0, 5.0, Outcome(Kind.GRADED)),
    GradeRow("bob", "02_b", 0.0, 5.0, Outcome(Kind.MISSING, "no 02_b.ipynb")),
    GradeRow(
        "cy",
        "02_b",
        3.0,
        5.0,
        Outcome(Kind.GRADED, "lost points on: test_w", ("errors in your code: attend ran past the 60 s limit and was stopped",)),
    ),
    GradeRow("dee", "02_b", 0.0, 5.0, Outcome(Kind.UNREADABLE, HOSTILE_STATUS)),
    GradeRow("eve", "02_b", 5.0, 5.0, Outcome(Kind.GRADED, "", ("unfinished: nothing",))),
    GradeRow(HOSTILE_ID, "02_b", 0.0, 5.0, Outcome(Kind.REFUSED, "over an archive limit")),
    GradeRow("notes.txt", "?", 0.0, 0.0, Outcome(Kind.UNIDENTIFIED, "not a notebook")),
]
SOFTMAX_ROWS = "the softmax runs over the queries, not the keys"
SOFTMAX = (Misconception(SOFTMAX_ROWS, "2 › Softmax"),)
SCALE = (Misconception("forgets the scale"),)
TESTS = [
    row
    for s, x, y, z in SCORES_A
    for row in (
        TestRow(s, "01_a", "test_x", float(x), 2.0, SOFTMAX if x == 0 else ()),
        TestRow(s, "01_a", "test_y", float(y), 2.0, SCALE if y == 0 else ()),
        TestRow(s, "01_a", "test_z", float(z), 1.0),
    )
] + [
    TestRow("ann", "02_b", "test_w", 5.0, 5.0),
    TestRow("cy", "02_b", "test_w", 3.0, 5.0, SOFTMAX),
    TestRow("dee", "02_b", "test_w", 0.0, 5.0, (Misconception("not counted: dee's notebook was not scored"),)),
    TestRow("eve", "02_b", "test_w", 5.0, 5.0),
]


def test_scores_mean_median_and_histogram_per_notebook() -> None:
    a, b = notebook_stats(results_of(GRADES, TESTS), SPECS)
    assert a.assignment == "01_a" and a.scores == [5.0, 3.0, 1.0, 4.0, 3.0] and a.not_scored == 0
    assert a.mean == pytest.approx(16 / 5) and a.median == 3.0
    assert a.histogram == [0, 0, 1, 0, 0, 0, 2, 0, 1, 1]  # 20 %, 60 % twice, 80 %, full marks in the last bin
    assert b.scores == [5.0, 3.0, 5.0] and b.not_scored == 3 and b.median == 5.0


def test_late_rows_and_the_points_their_penalties_took_off(tmp_path: Path) -> None:
    from dataclasses import replace
    from datetime import datetime, timedelta, timezone

    due = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
    on_time = Lateness(due, due - timedelta(hours=1), "timestamp.txt")
    late = Lateness(due, due + timedelta(hours=5), "timestamp.txt", timedelta(hours=5), penalty=0.5)
    grades = [replace(GRADES[0], lateness=on_time), replace(GRADES[1], lateness=late), replace(GRADES[2], lateness=late), *GRADES[3:]]
    a, b = notebook_stats(results_of(grades, TESTS), SPECS)
    assert (a.late, a.late_points, b.late) == (2, 1.0, 0)
    report = build_class_report(results_of(grades, TESTS), SPECS, [])
    assert report_json(report)["notebooks"][0]["late"] == 2
    assert "late (points off)" in render_html(report) and '<td class="num">2 (1)</td>' in render_html(report)


def test_per_question_mean_full_marks_and_discrimination_against_numpy() -> None:
    a, b = notebook_stats(results_of(GRADES, TESTS), SPECS)
    totals = [x + y + z for _, x, y, z in SCORES_A]
    x, y, z = a.questions
    assert (x.test, x.scored, x.mean, x.full_marks) == ("test_x", 5, pytest.approx(6 / 5), pytest.approx(3 / 5))
    assert (y.mean, y.full_marks) == (pytest.approx(1.0), pytest.approx(2 / 5))
    for question, column in ((x, 1), (y, 2)):
        item = [row[column] for row in SCORES_A]
        assert question.discrimination == pytest.approx(np.corrcoef(item, totals)[0, 1], abs=1e-12)
    assert z.discrimination is None and z.full_marks == 1.0  # everyone full marks: no variance
    assert b.questions[0].discrimination == pytest.approx(np.corrcoef([5, 3, 5], [5, 3, 5])[0, 1])  # unscored dee left out


def test_discrimination_is_undefined_with_fewer_than_three_or_no_variance() -> None:
    assert discrimination([1.0, 0.0], [3.0, 1.0]) is None
    assert discrimination([1.0, 1.0, 1.0], [3.0, 2.0, 1.0]) is None
    assert discrimination([1.0, 0.0, 1.0], [2.0, 2.0, 2.0]) is None
    assert discrimination([1.0, 0.0, 0.0], [3.0, 1.0, 2.0]) == pytest.approx(np.corrcoef([1, 0, 0], [3, 1, 2])[0, 1])


def test_misconceptions_counted_per_notebook_most_common_first_with_their_tests() -> None:
    found = [(m.assignment, m.name, m.students, m.tests) for m in misconceptions(results_of(GRADES, TESTS), SPECS)]
    assert found == [
        ("01_a", "forgets the scale", 2, ["test_y"]),  # bob, cy
        ("01_a", SOFTMAX_ROWS, 2, ["test_x"]),  # cy, the hostile id
        ("02_b", SOFTMAX_ROWS, 1, ["test_w"]),  # cy; dee's row is not scored
    ]


def test_a_failure_that_two_mistakes_explain_counts_for_both() -> None:
    tests = [TestRow("ann", "01_a", "test_y", 0.0, 2.0, (Misconception("a; b"), Misconception("c")))]
    grades = [GradeRow("ann", "01_a", 1.0, 5.0, Outcome(Kind.GRADED))]
    assert sorted(m.name for m in misconceptions(results_of(grades, tests), SPECS)) == ["a; b", "c"]


def test_a_student_with_the_same_misconception_on_two_tests_counts_once() -> None:
    tests = [
        TestRow("ann", "01_a", "test_y", 0.0, 2.0, (Misconception("m"),)),
        TestRow("ann", "01_a", "test_x", 0.0, 2.0, (Misconception("m"),)),
    ]
    grades = [GradeRow("ann", "01_a", 1.0, 5.0, Outcome(Kind.GRADED))]
    [only] = misconceptions(results_of(grades, tests), SPECS)
    assert (only.students, only.tests) == (1, ["test_x", "test_y"])  # in notebook order


def test_a_catalogued_misconception_shows_the_section_the_trusted_pass_named() -> None:
    """The trusted pass reads the section above the mistake's cell of the source notebook; the count shows the
    ``Misconception`` as it came, and that heading is the released notebook's too."""
    from autograder.grading.misconceptions import section_of
    from autograder.mistakes import MISTAKES
    from autograder.settings import NOTEBOOKS_DIR, SOLUTIONS_DIR

    first = "01_soft_dictionary_lookup"
    mistake = MISTAKES[first][0]
    source = json.loads((SOLUTIONS_DIR / first / f"{first}.ipynb").read_text())
    named = Misconception(mistake.name, section_of(source, mistake.cell))
    spec = {first: AssignmentSpec(first, {"test_a": 1.0})}
    grades = [GradeRow("ann", first, 0.0, 1.0, Outcome(Kind.GRADED))]
    [found] = misconceptions(results_of(grades, [TestRow("ann", first, "test_a", 0.0, 1.0, (named,))]), spec)
    released = (NOTEBOOKS_DIR / first / f"{first}.ipynb").read_text()
    assert found.misconception == named and found.section and found.section in released


def test_no_misconception_named_says_none_named() -> None:
    plain = [TestRow(t.student_id, t.assignment, t.test, t.score, t.max_score) for t in TESTS]
    html = render_html(build_class_report(results_of(GRADES, plain), SPECS))
    assert misconceptions(results_of(GRADES, plain), SPECS) == []
    assert "None named" in html


def test_not_graded_or_limit_rows_with_their_status() -> None:
    listed = [(p.student_id, p.assignment, p.kind, p.scored) for p in problems(GRADES)]
    assert listed == [
        ("bob", "02_b", "missing", False),
        ("cy", "02_b", "graded", True),  # scored, but a note names the time limit
        ("dee", "02_b", "unreadable", False),
        (HOSTILE_ID, "02_b", "refused", False),
        ("notes.txt", "?", "unidentified", False),
    ]
    assert problems(GRADES)[1].status.endswith("ran past the 60 s limit and was stopped")


def test_html_escapes_every_student_string_and_holds_no_script(tmp_path: Path) -> None:
    html = render_html(build_class_report(results_of(GRADES, TESTS), SPECS))
    assert "<script" not in html.lower() and HOSTILE_ID not in html and HOSTILE_STATUS not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;/td&gt;&lt;script&gt;" in html


def test_json_has_the_same_data_and_a_schema_version(tmp_path: Path) -> None:
    write_class_report(results_of(GRADES, TESTS), SPECS, tmp_path)
    data = json.loads((tmp_path / CLASS_REPORT_JSON).read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["schema"]
    a = data["notebooks"][0]
    assert (a["assignment"], a["scored"], a["median"], a["histogram"]["counts"]) == ("01_a", 5, 3.0, [0, 0, 1, 0, 0, 0, 2, 0, 1, 1])
    assert [q["test"] for q in a["questions"]] == ["test_x", "test_y", "test_z"] and a["questions"][2]["discrimination"] is None
    assert data["misconceptions"][0] == {
        "assignment": "01_a",
        "name": "forgets the scale",
        "students": 2,
        "tests": ["test_y"],
        "section": "",
    }
    assert [p["student_id"] for p in data["problems"]] == ["bob", "cy", "dee", HOSTILE_ID, "notes.txt"]
    assert data["similarity"]["threshold"] == SIMILARITY_THRESHOLD and data["similarity"]["pairs"] == []
    assert "<" not in json.dumps(data).replace(HOSTILE_ID, "").replace(HOSTILE_STATUS, "")  # no HTML of its own
    assert (tmp_path / CLASS_REPORT_HTML).is_file()


# --- similarity on three tiny submissions ---------------------------------------------------------------

GIVEN = '''def attention(queries, keys, values, mask=None):
    """Scaled dot-product attention over the last two axes."""
    scale = 1.0 / math.sqrt(queries.shape[-1])
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError("the mask must be boolean")
    batch_shape = torch.broadcast_shapes(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
'''
STUB = GIVEN + "    # YOUR CODE HERE\n    raise NotImplementedError()\n"
ANN = (
    GIVEN
    + """    scores = queries @ keys.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    weights = torch.exp(scores - top)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    output = weights @ values
    return output.expand(*batch_shape, *output.shape[-2:])
"""
)
# ann's code with every name changed and a comment added: the same tokens
BOB = ANN.replace("scores", "s").replace("weights", "w").replace("output", "result").replace("top", "peak")
BOB = BOB.replace("    weights = torch.exp", "    # exponentiate\n    weights = torch.exp")
# cy solved it another way; the given lines are the same as everyone's
CY = (
    GIVEN
    + """    rows = []
    for query in queries.unbind(-2):
        logits = torch.einsum("...d,...kd->...k", query, keys) * scale
        if mask is not None:
            logits = logits.masked_fill(~mask[..., len(rows), :], -math.inf)
        probabilities = torch.softmax(logits, dim=-1)
        rows.append(torch.einsum("...k,...kd->...d", probabilities, values))
    return torch.stack(rows, dim=-2).expand(*batch_shape, queries.shape[-2], values.shape[-1])
"""
)
HOSTILE_CODE = "\n    # </script><script>alert('code')</script>\n    note = '</pre><script>alert(2)</script>'\n"


def notebook(code: str) -> nbformat.NotebookNode:
    def meta(grade_id: str, **kinds) -> dict:
        return {"nbgrader": {"grade_id": grade_id, "locked": False, "solution": False, "grade": False, **kinds}}

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Attention"),
        nbformat.v4.new_code_cell("import math\n\nimport torch", metadata=meta("imports")),
        nbformat.v4.new_code_cell(code, metadata=meta("attention", solution=True)),
        nbformat.v4.new_code_cell("assert attention is not None", metadata=meta("test_attention", grade=True, points=2)),
    ]
    return nb


@pytest.fixture
def tiny_class(tmp_path: Path) -> tuple[list[Submission], Path]:
    released = tmp_path / "notebooks" / "01_a"
    released.mkdir(parents=True)
    nbformat.write(notebook(STUB), released / "01_a.ipynb")
    codes = {"ann": ANN, HOSTILE_ID: BOB.replace("    return result", HOSTILE_CODE + "    return result"), "cy": CY}
    submissions = [Submission(s, "01_a", nbformat.writes(notebook(c)).encode(), received_as=f"{s}.ipynb") for s, c in codes.items()]
    submissions += [Submission("dee", "01_a", None), Submission("eve", "01_a", b"{not json")]
    return submissions, tmp_path / "notebooks"


def test_similarity_finds_the_renamed_copy_and_not_the_independent_solution(tiny_class) -> None:
    submissions, released = tiny_class
    result = similar_pairs(submissions, ["01_a"], released)
    assert result.compared == {"01_a": 3} and result.notes == ["01_a: 1 notebook(s) could not be read and were not compared"]
    [pair] = result.pairs
    assert (pair.first, pair.second) == ("ann", HOSTILE_ID)
    assert min(pair.first_share, pair.second_share) > 0.8  # bob's added lines break the matches around them, nothing else
    assert pair.overlap_tokens >= MIN_OVERLAP_TOKENS
    assert any("weights / weights.sum(dim=-1, keepdim=True)" in m for m in pair.first_matches)
    assert any("w / w.sum(dim=-1, keepdim=True)" in m for m in pair.second_matches)
    assert "highlight-red" in pair.first_html and "highlight-green" in pair.second_html


def test_the_template_is_boilerplate(tiny_class) -> None:
    submissions, released = tiny_class
    everything = similar_pairs(submissions, ["01_a"], released, threshold=0.0, min_overlap_tokens=0)
    without = similar_pairs(submissions, ["01_a"], released.parent / "elsewhere", threshold=0.0, min_overlap_tokens=0)
    overlap = {(p.first, p.second): p.overlap_tokens for p in everything.pairs}
    overlap_without = {(p.first, p.second): p.overlap_tokens for p in without.pairs}
    assert "no released notebook" in without.notes[-1]
    # The given lines are most of what cy shares with ann: counted without the template, not with it.
    assert overlap_without[("ann", "cy")] >= MIN_OVERLAP_TOKENS > overlap.get(("ann", "cy"), 0)
    share = {(p.first, p.second): max(p.first_share, p.second_share) for p in everything.pairs}
    assert share.get(("ann", "cy"), 0.0) < SIMILARITY_THRESHOLD
    untouched = Submission("fay", "01_a", nbformat.writes(notebook(STUB)).encode())
    assert similar_pairs([untouched, submissions[0]], ["01_a"], released, threshold=0.0, min_overlap_tokens=0).pairs == []


def test_hostile_code_and_ids_are_escaped_in_the_side_by_side_view(tiny_class, tmp_path: Path) -> None:
    submissions, released = tiny_class
    grades = [GradeRow(s.student, "01_a", 2.0, 2.0, Outcome(Kind.GRADED)) for s in submissions]
    spec = {"01_a": AssignmentSpec("01_a", {"test_attention": 2.0})}
    write_class_report(results_of(grades, []), spec, tmp_path / "out", submissions, released)
    html = (tmp_path / "out" / CLASS_REPORT_HTML).read_text()
    assert "<script" not in html.lower() and "</pre><script>" not in html and HOSTILE_ID not in html
    assert "&lt;/script&gt;&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert html.count('class="highlight-red"') >= 1 and html.count('class="highlight-green"') >= 1
    data = json.loads((tmp_path / "out" / CLASS_REPORT_JSON).read_text())
    [pair] = data["similarity"]["pairs"]
    assert pair["second"] == HOSTILE_ID and "first_html" not in pair  # the JSON holds the code as text


def test_copydetect_html_passes_only_highlight_spans() -> None:
    dirty = "<span class='highlight-red'>x</span><span class='x' onclick='f()'>y</span><script>z</script><img src=x onerror=f()>"
    assert clean_code_html(dirty) == '<span class="highlight-red">x</span><span class="">y</span>'


# --- in a browser ---------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_chromium
def test_the_report_opens_from_disk_with_its_sections_and_no_script(tiny_class, tmp_path: Path) -> None:
    submissions, released = tiny_class
    grades = [GradeRow(s.student, "01_a", 2.0, 2.0, Outcome(Kind.GRADED)) for s in submissions[:3]]
    grades += [GradeRow("dee", "01_a", 0.0, 2.0, Outcome(Kind.MISSING, "no 01_a.ipynb"))]
    tests = [TestRow(g.student_id, "01_a", "test_attention", g.score, 2.0, () if g.score else (Misconception("m"),)) for g in grades]
    spec = {"01_a": AssignmentSpec("01_a", {"test_attention": 2.0})}
    path = write_class_report(results_of(grades, tests), spec, tmp_path / "out", submissions, released)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        assert page.locator("h1").inner_text() == "Class report"
        assert page.locator("h2").all_inner_texts() == ["Scores", "Misconceptions", "Similar code", "Not graded, or stopped by a limit"]
        assert page.locator("script").count() == 0
        images = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete && i.naturalWidth > 0)")
        assert images == [True], "the histogram renders from its data: URL"
        assert page.locator("details.pair").count() == 1
        assert page.locator("details.pair h4").all_inner_texts() == ["ann", HOSTILE_ID]  # shown as text
        assert [row.split("\t")[0] for row in page.locator("#problems tbody tr").all_inner_texts()] == ["dee"]
        assert page.locator("#misconceptions").inner_text().count("None named") == 1
        assert all(url.startswith(("file:", "data:")) for url in requests), requests
        assert errors == []


def test_a_copy_with_its_metadata_stripped_is_compared_as_graded(tiny_class) -> None:
    # Grading restores stripped nbgrader metadata before it grades; similarity reads the same repaired notebook.
    submissions, released = tiny_class
    stripped = notebook(ANN)
    for cell in stripped.cells:
        cell.metadata.pop("nbgrader", None)
    copy = Submission("gus", "01_a", nbformat.writes(stripped).encode(), received_as="gus.ipynb")
    result = similar_pairs([submissions[0], copy], ["01_a"], released)
    assert [(p.first, p.second) for p in result.pairs] == [("ann", "gus")]


def test_one_huge_student_costs_similarity_no_more_than_the_cap(tiny_class, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    submissions, released = tiny_class
    solutions = tmp_path / "solutions" / "01_a"
    solutions.mkdir(parents=True)
    nbformat.write(notebook(ANN), solutions / "01_a.ipynb")
    padding = "".join(f"    junk_{i} = queries.sum() * {i}\n" for i in range(20_000))  # about 0.6 MB of code
    huge = Submission("hal", "01_a", nbformat.writes(notebook(ANN.replace("    return", padding + "    return", 1))).encode())
    read = []
    real_compare = class_report.compare_code
    monkeypatch.setattr(class_report, "compare_code", lambda a, codes, *rest: read.append(dict(codes)) or real_compare(a, codes, *rest))
    result = similar_pairs([submissions[0], huge], ["01_a"], released, solutions_dir=tmp_path / "solutions")
    cap = class_report.MAX_CODE_FACTOR * len(class_report.student_code(notebook(ANN)))
    assert len(read[0]["hal"]) == cap < len(huge.content)
    assert result.notes == [
        f"01_a: only the first {cap:,} characters of code ({class_report.MAX_CODE_FACTOR} times the solution's) were compared for hal"
    ]
    assert [(p.first, p.second) for p in result.pairs] == [("ann", "hal")], "the copied function is still found"
