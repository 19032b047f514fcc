"""``release --handout DIR``: the students' repository, apart from the instructor's course.

The course repository (solutions, grader, site) serves instructors and self-learners; the handout serves
students and holds no answer. It is what nbgrader calls the release and CS336 a handout repository:

* ``notebooks/NN_name/NN_name.ipynb``: the released notebooks (``release``'s own), whose Colab badge and
  setup cell point at the handout's address (``handout_repository`` in course.toml), not the course's;
* ``course_utils/``: the students' package, what the notebooks and their visible tests import. The course's
  ``course_utils`` is exactly that package (what only the grader adds lives in ``autograder/``: the solution
  loader, the mistakes catalogue, the pipeline), so it is copied whole;
* ``pyproject.toml`` (the package alone, with the course's dependencies), a students' ``README.md`` and the
  course's ``LICENSE``.

Writing into a folder replaces only these entries: a clone's ``.git`` and anything else the instructor keeps
there stay. ``autograder.handout_leaks`` scans the result, and the package as pip installs it from a wheel.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
import tomllib

from course_utils.colab import PACKAGE, CourseAddress, colab_url, handout_address
from course_utils.notebook_cells import assignment_notebook

from .authoring import stamp_course_cells
from .course import list_assignments
from .handout_leaks import Leak, handout_leaks
from .release import generate
from .settings import REPO_ROOT, SOLUTIONS_DIR

STUDENT_PACKAGE = "course_utils"
OWNED = ("notebooks", STUDENT_PACKAGE, "pyproject.toml", "README.md", "LICENSE", ".gitignore")
LOCAL_SETUP = 'python3 -m venv .venv && .venv/bin/pip install -q -e ".[kernels,lab]"'


@dataclass(frozen=True)
class Handout:
    root: Path
    notebooks: tuple[str, ...]
    address: CourseAddress


def write_handout(
    out: Path, solutions_dir: Path = SOLUTIONS_DIR, address: CourseAddress | None = None, released: Path | None = None
) -> Handout:
    """Write the students' repository into ``out`` (made if missing); ``address``: course.toml's handout address.

    ``released``: a folder of notebooks known to be what ``release`` generates now (``notebooks/`` once
    ``release --check`` found it in sync), copied instead of generated again.
    """
    address = handout_address() if address is None else address
    with tempfile.TemporaryDirectory(prefix="handout-") as tmp:
        staging = Path(tmp) / "handout"
        if released is None:
            names = tuple(generate(solutions_dir.resolve(), staging / "notebooks"))
        else:
            names = tuple(list_assignments(solutions_dir))
            for name in names:
                shutil.copytree(released / name, staging / "notebooks" / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        for name in names:
            _point_at(assignment_notebook(staging / "notebooks", name), name, address)
        shutil.copytree(REPO_ROOT / STUDENT_PACKAGE, staging / STUDENT_PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (staging / "pyproject.toml").write_text(_pyproject(), encoding="utf-8")
        (staging / "README.md").write_text(_readme(staging / "notebooks", names, address), encoding="utf-8")
        (staging / ".gitignore").write_text(".venv/\n__pycache__/\n.ipynb_checkpoints/\n*.egg-info/\n", encoding="utf-8")
        shutil.copy2(REPO_ROOT / "LICENSE", staging / "LICENSE")
        out.mkdir(parents=True, exist_ok=True)
        for entry in OWNED:  # only what the handout owns: a clone's .git and the instructor's own files stay
            target = out / entry
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            (shutil.copytree if (staging / entry).is_dir() else shutil.copy2)(staging / entry, target)
    return Handout(out, names, address)


def _point_at(path: Path, name: str, address: CourseAddress) -> None:
    """The released notebook's badge and setup cell, written for the handout's address instead of the course's."""
    notebook = nbformat.read(path, as_version=4)
    stamp_course_cells(notebook, f"notebooks/{name}/{name}.ipynb", student=True, address=address)
    nbformat.write(notebook, path)


def _pyproject() -> str:
    """The students' package alone: the course's light dependencies and its Triton extra, plus JupyterLab for local work."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {"kernels": project["optional-dependencies"]["kernels"], "lab": ["jupyterlab>=4.2"]}
    lines = [
        "[build-system]",
        'requires = ["setuptools>=68"]',
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        f"name = {json.dumps(PACKAGE)}",
        f"version = {json.dumps(project['version'])}",
        'description = "Attention, from lookup to kernel: the notebooks you fill in, and the helpers they import."',
        'readme = "README.md"',
        f"requires-python = {json.dumps(project['requires-python'])}",
        f"dependencies = {json.dumps(project['dependencies'])}",
        "",
        "[project.optional-dependencies]",
        *(f"{extra} = {json.dumps(requirements)}" for extra, requirements in extras.items()),
        "",
        "[tool.setuptools]",
        f"packages = [{json.dumps(STUDENT_PACKAGE)}]",
        "",
    ]
    return "\n".join(lines)


def _title(path: Path) -> str:
    """The notebook's title: its first markdown heading, without the number the table already shows."""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def _readme(notebooks: Path, names: tuple[str, ...], address: CourseAddress) -> str:
    rows = []
    for name in names:
        path = f"notebooks/{name}/{name}.ipynb"
        opened = f"[Open in Colab]({colab_url(path, address)})" if address.is_set else "upload it to Colab"
        rows.append(f"| {name[:2]} | [{_title(assignment_notebook(notebooks, name))}]({path}) | {opened} |")
    return README.format(table="\n".join(rows), setup=LOCAL_SETUP)


README = """# Attention, from lookup to kernel: your notebooks

This repository is what you work on: the course's notebooks, with the functions for you to write, and
`course_utils`, the small package the notebooks import (plots, worked examples, the checks of the visible
tests, and PyTorch versions of earlier pieces for code you carry from one notebook to the next). The
solutions and the hidden tests are not here: your instructor's grader runs them when you hand in.

| # | Notebook | On Colab |
|---|---|---|
{table}

## On Google Colab

Open a notebook from its link above (or from the badge under its title) and run the setup cell first: it
installs this repository's package on the Colab machine, in about half a minute. Set `STUDENT_ID` in the
cell under the title to your id as on the course roster (notebooks 01 to 06 draw the numbers of your
questions from it), then work from top to bottom. Colab saves to your Google Drive only when you ask it to
(**File → Save a copy in Drive**).

## On your own machine

With Python 3.10 or newer on Linux (macOS and Windows work without the Triton kernels of notebooks 07 and
08), one command installs the package, Triton and JupyterLab into `.venv`:

```bash
{setup}
```

Then start JupyterLab with `.venv/bin/jupyter lab notebooks/`. On a machine without a GPU, PyPI's
Linux torch is a large CUDA build; add `--extra-index-url https://download.pytorch.org/whl/cpu` to the
pip command for the CPU one.

## Checking your work

The last cell of every notebook runs its visible tests again and says which pass. It says which points it
could check and which only the grader decides: the values of your question answers, and the hidden tests.

## Handing in

Hand in each notebook as the file it is, under its own name (`01_soft_dictionary_lookup.ipynb`, ...):
on Colab, **File → Download → Download .ipynb**, and rename a `Copy of …` back. Your instructor says where
to upload it, or gives you the nbgrader command (`nbgrader submit`) if the course uses JupyterHub.
"""


def installed_package(handout: Path, into: Path) -> Path:
    """Build a wheel of the handout's package, install it with ``--no-deps`` into a fresh venv under ``into``,
    and return the folder pip installed it to (its ``site-packages``): what a student's machine receives."""
    wheels, venv, source = into / "wheels", into / "venv", into / "source"
    source.mkdir(parents=True)
    for entry in ("pyproject.toml", "README.md", "LICENSE", STUDENT_PACKAGE):  # a build writes build/: never into the handout
        (shutil.copytree if (handout / entry).is_dir() else shutil.copy2)(handout / entry, source / entry)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)])
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    site = _run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    wheel = next(wheels.glob("*.whl"))
    _run([*pip[:3], "--python", str(venv / "bin" / "python"), *pip[3:], "install", "--no-deps", "--no-compile", str(wheel)])
    return Path(site)


def _run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:6])} ... failed: {(result.stderr or result.stdout).strip()[-2000:]}")
    return result.stdout


def handout_problems(solutions_dir: Path = SOLUTIONS_DIR, released: Path | None = None) -> list[Leak]:
    """Every leak of a freshly written handout, and of its package as pip installs it (``release --check``)."""
    with tempfile.TemporaryDirectory(prefix="handout-check-") as tmp:
        handout = write_handout(Path(tmp) / "handout", solutions_dir, released=released).root
        leaks = handout_leaks(handout, solutions_dir)
        site = installed_package(handout, Path(tmp) / "install")
        leaks += [Leak(f"installed: {leak.path}", leak.what) for leak in handout_leaks(site, solutions_dir)]
    return leaks
