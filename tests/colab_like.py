"""A Colab-like runtime: a fresh virtual environment with only what Colab has, and a kernel in it.

Colab gives torch, numpy, matplotlib and a Jupyter kernel, and nothing of this course. A student
notebook's setup cell must install the rest, here from the handout folder ``release --handout``
wrote (``COURSE_PACKAGE_SOURCE``) instead of the handout's repository on GitHub: the students'
package alone, with no grader and no solution installed in the runtime. The solutions run there
too, with one grader module on their path only (``grader_loader``), as in the sealed run: the one
their hidden tests import ``load_solution`` from. So a solution's self-check, which runs the visible
tests the handout's notebooks hold, runs them with the students' package alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from nbformat.notebooknode import NotebookNode

from autograder.settings import REPO_ROOT
from autograder.site import run_notebook
from course_utils.colab import SOURCE_ENV_VAR
from course_utils.runtime import GRADING_ENV_VAR

COLAB_PACKAGES = ["torch", "numpy", "matplotlib", "ipykernel"]
KERNEL_NAME = "colab-like"


@dataclass
class ColabRuntime:
    root: Path
    package_source: Path
    runs: dict[tuple[str, str], "NotebookRun"] = field(default_factory=dict)  # (folder, name) -> run

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def has_module(self, module: str) -> bool:
        probe = [str(self.python), "-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"]
        return subprocess.run(probe, cwd=self.root).returncode == 0

    def execute(self, notebook_path: Path, *, allow_errors: bool, timeout: int = 180, path: Path | None = None) -> "NotebookRun":
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager

        specs = KernelSpecManager(kernel_dirs=[str(self.root / "share" / "jupyter" / "kernels")])
        env = {k: v for k, v in os.environ.items() if k not in (GRADING_ENV_VAR, "VIRTUAL_ENV", "PYTHONPATH")}
        env[SOURCE_ENV_VAR] = self.package_source.as_uri()
        env["OMP_NUM_THREADS"] = "1"  # the tests run two notebooks at once on two cores: one thread each
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        if path is not None:
            env["PYTHONPATH"] = str(path)
        notebook = run_notebook(
            notebook_path,
            kernel_manager=KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs),
            env=env,
            allow_errors=allow_errors,
            timeout=timeout,
        )
        return NotebookRun(notebook)


@dataclass
class NotebookRun:
    notebook: NotebookNode

    def outputs(self, kind: str) -> list[dict]:
        return [o for c in self.notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == kind]

    def figures(self) -> int:
        """Images the notebook drew (each matplotlib figure shown is one)."""
        return sum("image/png" in o.get("data", {}) for kind in ("display_data", "execute_result") for o in self.outputs(kind))

    def text(self) -> str:
        return "".join(o.get("text", "") for o in self.outputs("stream"))


def link_installed(names: list[str], into: Path, *, leave_out: frozenset[str]) -> list[str]:
    """Make the installed distributions ``names``, and all they require, importable from ``into``.

    Each is linked, not copied, from this environment: a fresh pip install of torch takes a minute
    and the same files. Returns the distributions linked, ``leave_out`` (and what only it needs) aside.
    """
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    into.mkdir(parents=True, exist_ok=True)
    todo, linked = [canonicalize_name(n) for n in names], []
    while todo:
        name = todo.pop()
        if name in linked or name in leave_out:
            continue
        linked.append(name)
        dist = metadata.distribution(name)
        site = Path(dist.locate_file(""))
        tops = {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..") and Path(f).suffix != ".pth"}
        for top in sorted(tops):
            if not (into / top).exists():
                (into / top).symlink_to(site / top)
        for text in dist.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return linked


def make_runtime(root: Path, package_source: Path) -> ColabRuntime:
    """A fresh venv with Colab's packages (the course's CPU build of torch) and a kernel; setup cells install from
    ``package_source``.

    They are linked from this environment through a ``.pth`` file (pip leaves what lies outside the
    venv alone). Triton is left out: notebook 07's setup cell must install it, as Colab's may.
    """
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = str(root / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True
    )
    packages = root / "colab-packages"
    link_installed(COLAB_PACKAGES, packages, leave_out=frozenset({"triton"}))
    (Path(site.stdout.strip()) / "colab-packages.pth").write_text(f"{packages}\n")
    subprocess.run([python, "-m", "ipykernel", "install", "--prefix", str(root), "--name", KERNEL_NAME], check=True, capture_output=True)
    return ColabRuntime(root, package_source)


def grader_loader(folder: Path) -> Path:
    """A folder holding, of the grader, only ``autograder/solutions.py`` (and its package's ``__init__``): what the
    sandbox binds for hidden tests. Put on a solution run's path, nothing else of the grader is importable."""
    package = folder / "autograder"
    package.mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", "solutions.py"):
        shutil.copy2(REPO_ROOT / "autograder" / name, package / name)
    return folder
