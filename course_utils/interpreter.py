"""The Python a child process runs: this one, named through the real folder of its environment.

A venv reached through a symbolic link (``.venv -> /opt/venvs/course``) names its interpreter by the
link. A sandbox that binds only the real folders would not find it there, and resolving the interpreter
itself would leave the venv (its ``python`` is a link to the base interpreter, and the venv is found from
the name it was started by). So the folder is resolved, and the name kept.
"""

from __future__ import annotations

import sys
from pathlib import Path


def python_executable() -> str:
    executable = Path(sys.executable)
    return str(executable.parent.resolve() / executable.name)
