"""Opening the notebooks on Google Colab: the badge, the setup cell, and the hand-in instruction.

The repository's address lives here and nowhere else. ``python -m autograder release`` writes
the first two cells of every notebook from it: a markdown cell with the "Open in Colab" badge
(pointing at that notebook's own path, ``solutions/`` or ``notebooks/``) and a setup cell that
installs this package when it is missing, as it is on a fresh Colab runtime.
"""

from __future__ import annotations

import json
import sys

# The one place to change when the course moves: then run `python -m autograder release`.
REPOSITORY = "https://github.com/attention-course/attention-from-lookup-to-kernel"
BRANCH = "main"
PACKAGE = "attention-course"
# Where the setup cell installs the package from; tests point it at a local copy of the checkout.
SOURCE_ENV_VAR = "COURSE_PACKAGE_SOURCE"

EXTRA_MODULES = {"kernels": "triton"}  # an extra of the package, and the module that shows it is there

BADGE_CELL_ID = "colab-badge"
SETUP_CELL_ID = "colab-setup"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"


def on_colab() -> bool:
    """True inside a Colab runtime, which imports ``google.colab`` at start-up."""
    return "google.colab" in sys.modules


def colab_url(path: str) -> str:
    """Colab's address for a notebook of this repository, ``path`` relative to its root."""
    owner_repo = REPOSITORY.removeprefix("https://github.com/").strip("/")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{BRANCH}/{path}"


def badge_markdown(path: str, *, student: bool) -> str:
    """The first cell: the badge, and what a Colab user must know before starting."""
    name = path.rsplit("/", 1)[-1]
    hand_in = (
        f"To hand it in: **File → Download → Download .ipynb**, and keep the name `{name}` "
        "(Colab may call its copy `Copy of …`: rename it back if you can)."
        if student
        else "These are the solutions; the student version is in `notebooks/`."
    )
    return (
        f'<a href="{colab_url(path)}" target="_parent"><img src="{BADGE_IMAGE}" alt="Open In Colab"/></a>\n\n'
        f"*On Colab*: run the setup cell below first; it installs the course package (about half a minute). "
        f"{hand_in}"
    )


def setup_source(extras: tuple[str, ...] = ()) -> str:
    """The setup cell: install the course package where it (or an extra it needs) is missing.

    The extras (Triton) ship wheels for Linux only: elsewhere the cell neither asks for them nor
    reinstalls on every run, and where their install fails it installs the package without them and
    says so. The notebook's other sections still run.
    """
    install = '[sys.executable, "-m", "pip", "install", "-q", {} + " @ " + source]'
    lines = [
        "# Setup: on Colab, or wherever the course package is missing, install it (once per runtime).",
        "import importlib",
        "import importlib.util",
        "import os",
        "import subprocess",
        "import sys",
        "",
    ]
    if extras:
        wanted = ["course_utils", *(EXTRA_MODULES[e] for e in extras)]
        names = " and ".join(EXTRA_MODULES[e] for e in extras)
        lines += [
            f'on_linux = sys.platform == "linux"  # {names}: wheels for Linux only',
            f'course_modules = {json.dumps(wanted)} if on_linux else ["course_utils"]',
            f'requirement = "{PACKAGE}[{",".join(extras)}]" if on_linux else "{PACKAGE}"',
        ]
    else:
        lines += ['course_modules = ["course_utils"]', f'requirement = "{PACKAGE}"']
    lines += [
        "if any(importlib.util.find_spec(module) is None for module in course_modules):",
        f'    source = os.environ.get("{SOURCE_ENV_VAR}") or "git+{REPOSITORY}@{BRANCH}"',
        '    print(f"installing the course package from {source} ...")',
    ]
    if extras:
        lines += [
            f"    if subprocess.run({install.format('requirement')}).returncode != 0:",
            f'        print("{names} could not be installed: installing the course package without it")',
            f"        subprocess.run({install.format(json.dumps(PACKAGE))}, check=True)",
        ]
    else:
        lines.append(f"    subprocess.run({install.format('requirement')}, check=True)")
    lines.append("    importlib.invalidate_caches()")
    return "\n".join(lines)
