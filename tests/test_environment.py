"""The environment files agree with each other, CI runs the README's commands, course_utils stays light."""

from __future__ import annotations

import re
import subprocess
import sys

import tomllib
import yaml
from packaging.requirements import Requirement


def pyproject(repo_root) -> dict:
    return tomllib.loads((repo_root / "pyproject.toml").read_text())


def readme_command(repo_root, marker: str) -> str:
    text = (repo_root / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\n```bash\n(.+?)\n```", text)
    assert match, f"README.md has no ```bash block after <!-- {marker} -->"
    return match.group(1)


def test_ci_runs_the_readme_setup_and_test_commands(repo_root) -> None:
    ci = (repo_root / ".ci" / "run").read_text().splitlines()
    assert readme_command(repo_root, "setup-command") in ci
    assert readme_command(repo_root, "test-command") in ci
    assert readme_command(repo_root, "browser-command") in ci
    assert readme_command(repo_root, "sandbox-command") in ci
    assert ci.index(readme_command(repo_root, "sandbox-command")) < ci.index(readme_command(repo_root, "test-command"))
    assert ci.index(readme_command(repo_root, "setup-command")) < ci.index(readme_command(repo_root, "test-command"))
    assert ci.index(readme_command(repo_root, "browser-command")) < ci.index(readme_command(repo_root, "test-command"))


def test_environment_yml_agrees_with_pyproject(repo_root) -> None:
    project = pyproject(repo_root)["project"]
    self_name = project["name"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        wanted += [r for r in map(Requirement, extra) if r.name != self_name]
    wanted_specs = {r.name.lower(): str(r.specifier) for r in wanted}

    env = yaml.safe_load((repo_root / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = [Requirement(d.replace(" ", "")) for d in conda + pip if not d.startswith(("python=", "pip", "-"))]
    listed_specs = {r.name.lower(): str(r.specifier) for r in listed}

    # pyproject gives torch a range (Colab keeps its own torch); local and CI installs pin it.
    pinned = Requirement(next(line for line in (repo_root / "constraints-cpu.txt").read_text().splitlines() if line.startswith("torch")))
    assert str(pinned.specifier) == "==2.13.0"
    assert listed_specs.pop("torch") == str(pinned.specifier)
    assert Requirement("torch" + wanted_specs.pop("torch")).specifier.contains("2.13.0")
    assert listed_specs == wanted_specs
    assert "-e ." in pip and any(d.startswith("python=3.11") for d in conda)


def test_course_utils_installs_light(repo_root) -> None:
    project = pyproject(repo_root)["project"]
    assert sorted(Requirement(r).name for r in project["dependencies"]) == ["matplotlib", "numpy", "torch"]
    assert "nbgrader" in " ".join(project["optional-dependencies"]["instructor"])


def test_course_utils_imports_without_the_instructor_tools() -> None:
    blocked = "import sys\nfor m in ('nbgrader', 'nbformat', 'nbclient', 'tqdm', 'hypothesis', 'triton'): sys.modules[m] = None\n"
    code = blocked + "import course_utils, course_utils.checks, course_utils.notebook_cells, course_utils.plots, course_utils.runtime"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
