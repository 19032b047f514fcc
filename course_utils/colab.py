"""Opening the notebooks on Google Colab: the badge, the setup cell, and the hand-in instruction.

The course's public address lives in ``course.toml`` at the repository's root and nowhere else;
an instructor sets it once with ``python -m autograder release --repo-url URL``. ``release``
then writes the first two cells of every notebook from it: a markdown cell with the "Open in
Colab" badge (pointing at that notebook's own path, ``solutions/`` or ``notebooks/``) and a
setup cell that installs this package when it is missing, as it is on a fresh Colab runtime.
Without an address the badge is left out and the cells say how to open the notebook by hand.
The handout, the students' own repository (``release --handout``), has an address of its own beside
the course's, and its notebooks' cells are written from that one.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "attention-course"
# Where the setup cell installs the package from; tests point it at a local copy of the checkout.
SOURCE_ENV_VAR = "COURSE_PACKAGE_SOURCE"
# The course setting: in a checkout, beside solutions/ (course_utils/ is one level down).
COURSE_FILE = Path(__file__).resolve().parent.parent / "course.toml"

EXTRA_MODULES = {"kernels": "triton"}  # an extra of the package, and the module that shows it is there

BADGE_CELL_ID = "colab-badge"
SETUP_CELL_ID = "colab-setup"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
# What a notebook says while no address is set: a test checks that none says it once one is.
NO_ADDRESS = "this course's address is not set yet"

# Colab opens notebooks from GitHub only; these are GitHub's rules for owner and repository names.
GITHUB_URL = re.compile(r"https://github\.com/([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/([A-Za-z0-9._-]{1,100}?)(?:\.git)?/?")
BRANCH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}")


class AddressError(ValueError):
    """An address or branch that Colab cannot open, or that could not be written into a notebook safely."""


@dataclass(frozen=True)
class CourseAddress:
    """Where the course lives on GitHub: ``repository`` is ``https://github.com/OWNER/REPO``, or "" when unset."""

    repository: str = ""
    branch: str = "main"

    @property
    def is_set(self) -> bool:
        return bool(self.repository)

    @property
    def owner_repo(self) -> str:
        return self.repository.removeprefix("https://github.com/")


def parse_address(url: str, branch: str = "main") -> CourseAddress:
    """A checked address: only GitHub repositories, in a form that goes into markdown and code as is."""
    match = GITHUB_URL.fullmatch(url.strip())
    if match is None:
        raise AddressError(f"not a GitHub repository address: {url!r} (expected https://github.com/OWNER/REPO)")
    if (match.group(1), match.group(2)) == ("OWNER", "REPO"):  # the docs' placeholder, copied as it is
        raise AddressError(f"{url!r} is the placeholder: put your course's own GitHub owner and repository in its place")
    if not BRANCH_NAME.fullmatch(branch) or ".." in branch:
        raise AddressError(f"not a branch name: {branch!r}")
    return CourseAddress(f"https://github.com/{match.group(1)}/{match.group(2)}", branch)


# course.toml's top-level keys: the course's own address, and the handout's (the students' repository,
# ``release --handout``), which an instructor publishes while keeping the course private.
COURSE_KEYS = ("repository", "branch")
HANDOUT_KEYS = ("handout_repository", "handout_branch")


def course_address(path: Path | None = None, keys: tuple[str, str] = COURSE_KEYS) -> CourseAddress:
    """The address in ``course.toml`` (the handout's with ``HANDOUT_KEYS``); unset where the file is missing or empty."""
    path = path or COURSE_FILE
    if not path.is_file():
        return CourseAddress()
    import tomllib  # Python 3.11+, as the instructor's tools are; notebooks (3.10 too) never read the file

    setting = tomllib.loads(path.read_text())
    url, branch = str(setting.get(keys[0], "")), str(setting.get(keys[1], "main"))
    return parse_address(url, branch) if url else CourseAddress(branch=branch)


def handout_address(path: Path | None = None) -> CourseAddress:
    """Where the students' repository lives: what the handout's badges and setup cells point at."""
    return course_address(path, HANDOUT_KEYS)


ADDRESS_HEADER = (
    "# The course's public address: every Colab badge, setup cell and the solutions site are written from it.\n"
    "# Set it with `python -m autograder release --repo-url https://github.com/OWNER/REPO [--branch BRANCH]`.\n"
    "# The handout's (the students' repository): `release --handout DIR --handout-url https://github.com/OWNER/REPO`.\n"
)


def write_address(address: CourseAddress, path: Path | None = None, keys: tuple[str, str] = COURSE_KEYS) -> None:
    """Record the address for every later ``release`` (the values were checked by ``parse_address``).

    Only its two top-level keys change: the other keys and the file's tables (due dates, the late policy) are kept.
    """
    path = path or COURSE_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True) if path.is_file() else []
    first_table = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines))
    mine = re.compile(rf"\s*({keys[0]}|{keys[1]})\s*=")
    kept_top = [line for line in lines[:first_table] if not mine.match(line)]
    while kept_top and not kept_top[-1].strip():
        kept_top.pop()
    if not any(line.startswith("#") for line in kept_top):
        kept_top = [ADDRESS_HEADER, *kept_top]
    values = f"{keys[0]} = {json.dumps(address.repository)}\n{keys[1]} = {json.dumps(address.branch)}\n"
    path.write_text("".join([*kept_top, values, *(["\n"] if first_table < len(lines) else []), *lines[first_table:]]), encoding="utf-8")


def on_colab() -> bool:
    """True inside a Colab runtime, which imports ``google.colab`` at start-up."""
    return "google.colab" in sys.modules


def colab_url(path: str, address: CourseAddress) -> str:
    """Colab's address for a notebook of this repository, ``path`` relative to its root."""
    return f"https://colab.research.google.com/github/{address.owner_repo}/blob/{address.branch}/{path}"


def badge_markdown(path: str, *, student: bool, address: CourseAddress) -> str:
    """The first cell: the badge, and what a Colab user must know before starting."""
    name = path.rsplit("/", 1)[-1]
    hand_in = (
        f"To hand it in: **File → Download → Download .ipynb**, and keep the name `{name}` "
        "(Colab may call its copy `Copy of …`: rename it back if you can)."
        if student
        else "These are the solutions; the student version is in `notebooks/`."
    )
    if not address.is_set:
        return (
            f"*On Colab*: {NO_ADDRESS}, so there is no link that opens it there. Upload the file instead "
            f"(**File → Upload notebook**) and ask your instructor how to install the course package. {hand_in}"
        )
    return (
        f'<a href="{colab_url(path, address)}" target="_parent"><img src="{BADGE_IMAGE}" alt="Open In Colab"/></a>\n\n'
        f"*On Colab*: run the setup cell below first; it installs the course package (about half a minute). "
        f"{hand_in}"
    )


def setup_source(address: CourseAddress, extras: tuple[str, ...] = ()) -> str:
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
    ]
    if address.is_set:
        lines.append(f'    source = os.environ.get("{SOURCE_ENV_VAR}") or "git+{address.repository}@{address.branch}"')
    else:
        lines += [
            f'    source = os.environ.get("{SOURCE_ENV_VAR}")',
            "    if not source:",
            f'        raise RuntimeError("No course package here, and {NO_ADDRESS}: ask your instructor where to get it.")',
        ]
    lines.append('    print(f"installing the course package from {source} ...")')
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
