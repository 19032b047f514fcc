"""The course's nbgrader configuration, in one place.

Every nbgrader run of the course (release, autograde, feedback) is configured by
``course_config``; only the folders differ between runs. It names the course's own
preprocessors, so it lives apart from ``settings``, which they import.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settings import IGNORED_STDERR, MAX_OUTPUT_CHARS, MAX_OUTPUTS_PER_CELL, MAX_RICH_OUTPUT_BYTES, GradingLimits

if TYPE_CHECKING:
    from traitlets.config import Config


def course_config(
    course_root: Path,
    *,
    db_url: str,
    source_dir: Path | str = "source",
    release_dir: Path | str = "release",
    limits: GradingLimits = GradingLimits(),
    report_dir: Path | None = None,
) -> Config:
    """nbgrader configuration for a course rooted at ``course_root``, its gradebook at ``db_url`` (SQLAlchemy).

    ``source_dir`` and ``release_dir`` are relative to the root or absolute. ``limits`` bound what one
    notebook may take and say whether it runs sealed: the defaults unless ``grade`` was told otherwise.
    """
    from traitlets.config import (
        Config,  # an instructor tool: course_utils users lack it
    )

    c = Config()
    c.CourseDirectory.root = str(course_root)
    c.CourseDirectory.source_directory = str(source_dir)
    c.CourseDirectory.release_directory = str(release_dir)
    c.CourseDirectory.db_url = db_url
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", ".DS_Store"]

    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.GenerateAssignment.preprocessors = _generate_assignment_steps()
    _configure_autograde(c, Path(course_root), source_dir, release_dir, limits, report_dir)
    _configure_feedback(c, Path(course_root), source_dir)
    return c


def _configure_autograde(
    c: Config, course_root: Path, source_dir: Path | str, release_dir: Path | str, limits: GradingLimits, report_dir: Path | None
) -> None:
    """Autograde: admission first, the sealed run with its limits, then nbgrader's own steps."""
    # Grading runs the notebook sealed and decides verdicts in a trusted replay (CONTRACT.md).
    c.SealedExecute.solutions_dir = str(Path(course_root) / source_dir)
    c.SealedExecute.report_dir = str(report_dir or Path(course_root) / "sealed-reports")
    c.SealedExecute.sealed = limits.sealed
    c.SealedExecute.cell_timeout = limits.cell_timeout
    c.SealedExecute.memory_limit = int(limits.memory_bytes or 0)
    # A deleted test cell is put back from the source notebook (edited ones are, by checksum).
    c.OverwriteCells.add_missing_cells = True
    # Before nbgrader reads the cells: the admission grade uses, so stock autograde survives forged metadata.
    c.Autograde.sanitize_preprocessors = _autograde_sanitize_steps()
    c.AdmitSubmission.release_dir = str(Path(course_root) / release_dir)
    c.Autograde.autograde_preprocessors = [
        "autograder.nbgrader_ext.sealed_execute.SealedExecute",
        "nbgrader.preprocessors.IgnorePattern",
        "nbconvert.preprocessors.ClearMetadataPreprocessor",
        "autograder.nbgrader_ext.limits.LimitOutputSize",
        "nbgrader.preprocessors.SaveAutoGrades",
        "nbgrader.preprocessors.AssignLatePenalties",
        "nbgrader.preprocessors.CheckCellMetadata",
    ]
    c.LimitOutputSize.max_chars = MAX_OUTPUT_CHARS
    c.LimitOutputSize.max_outputs = MAX_OUTPUTS_PER_CELL
    c.LimitOutputSize.max_rich_bytes = MAX_RICH_OUTPUT_BYTES
    c.IgnorePattern.enabled = True  # off by default in nbgrader 0.9
    c.IgnorePattern.pattern = IGNORED_STDERR


def _configure_feedback(c: Config, course_root: Path, source_dir: Path | str) -> None:
    """Feedback and every page shown as HTML: hidden tests redacted, student HTML sanitised, math offline."""
    # Feedback goes to students: strip hidden-test code and its tracebacks.
    c.GenerateFeedback.exporter_class = "autograder.nbgrader_ext.feedback.FeedbackHtmlExporter"
    c.GenerateFeedback.preprocessors = [
        "nbgrader.preprocessors.GetGrades",
        "autograder.nbgrader_ext.feedback.RedactHiddenTests",
        "autograder.nbgrader_ext.discussion.RestoreDiscussions",
        "autograder.nbgrader_ext.feedback.OfflineMarkdown",  # math as MathML: the page loads nothing
    ]
    # Every notebook shown as HTML (feedback, formgrader) goes through the allow-list first: student
    # HTML must not run in the instructor's browser. The exporter registers it, enabled, before the
    # converter's own list above (nbgrader registers that list with each step's own `enabled`, so an
    # nbconvert step there does nothing unless enabled), so discussions are restored after, from the source.
    c.HTMLExporter.preprocessors = ["autograder.nbgrader_ext.sanitize.SanitizeStudentHtml"]
    # And what any template renders as markdown (cells after the math step, gradebook comments) is cleaned last.
    c.HTMLExporter.filters = {"markdown2html": "autograder.nbgrader_ext.sanitize.markdown_to_clean_html"}
    # Feedback explains the graded questions: the discussions the release withheld come back.
    c.RestoreDiscussions.source_dir = str(Path(course_root) / source_dir)


# The course's own steps, named by their import path as nbgrader's lists allow: the configuration stays below the
# grading code that those steps use (no import reaches up from here).
EXT = "autograder.nbgrader_ext"


def _generate_assignment_steps() -> list[Any]:
    """nbgrader's generate_assignment steps, with the discussions of graded questions and the showcase
    cells withheld before solutions are cleared and the student's course cells stamped last."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions

    steps: list[Any] = list(GenerateAssignment.class_traits()["preprocessors"].default())
    at = steps.index(ClearSolutions)
    steps[at:at] = [f"{EXT}.discussion.WithholdDiscussion", f"{EXT}.showcase.WithholdShowcase"]
    return [*steps, f"{EXT}.course_cells.StampStudentCells"]


def _autograde_sanitize_steps() -> list[Any]:
    """nbgrader's autograde sanitizing steps, after the course's admission (``AdmitSubmission``), with
    OverwriteCells quiet about the test cells' hidden tests (``OverwriteCellsQuietly``)."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import OverwriteCells

    defaults = Autograde.class_traits()["sanitize_preprocessors"].default()
    quiet = f"{EXT}.admission.OverwriteCellsQuietly"
    return [f"{EXT}.admission.AdmitSubmission", *(quiet if step is OverwriteCells else step for step in defaults)]
