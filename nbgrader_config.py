"""This checkout as a stock nbgrader course: `nbgrader generate_assignment`, `validate`, `autograde`,
`generate_feedback`, `formgrader` and the exchange commands work here unchanged.

nbgrader's folders map onto the course's layout: the source is solutions/ and the release is
notebooks/. Every other setting comes from autograder/settings.py, the one definition that
`python -m autograder` uses too. Your own nbgrader config (~/.jupyter/nbgrader_config.py) still
supplies what this file leaves alone: the course id and the exchange's root.
"""

from pathlib import Path

from autograder.course_config import course_config
from autograder.settings import put_environment_on_path

put_environment_on_path()  # nbgrader shells out to alembic, which lives beside this Python
course_root = Path(__file__).resolve().parent
c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)
c.merge(course_config(course_root, db_url=f"sqlite:///{course_root / 'gradebook.db'}", source_dir="solutions", release_dir="notebooks"))
