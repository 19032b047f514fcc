"""The instructor's side of the course: release, grading, the solutions site."""

import sys

# jsonschema (under nbformat and nbgrader) builds rfc3987_syntax's IRI grammar when it is
# imported: 1.8 s of every grading process on a 2-core machine. Notebooks have no IRI fields
# to validate, and without the module jsonschema skips that one format check.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
