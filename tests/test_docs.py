"""The documentation: a README a newcomer reads in minutes, and every relative link in it and in the guides resolves."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from autograder.settings import REPO_ROOT

README_LIMIT = 12 * 1024  # bytes: the README says what the course is and links to the rest
DOCUMENTS = sorted(
    [REPO_ROOT / "README.md", REPO_ROOT / "benchmarks" / "README.md", *(REPO_ROOT / "docs").glob("*.md")],
    key=lambda path: path.relative_to(REPO_ROOT).as_posix(),
)
GUIDES = ["docs/students.md", "docs/instructors.md", "docs/threat-model.md", "docs/contributing.md"]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+).*?\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:name|id)=\"([^\"]*)\"", re.IGNORECASE)
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
SCHEME = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)


def prose_lines(text: str, *, keep_code: bool = False) -> list[str]:
    """The lines of a markdown text outside fenced code blocks, with inline code removed unless ``keep_code``."""
    lines, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) and not line.strip(" `~"):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        lines.append(line if keep_code else INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    text = re.sub(r"<[^>]+>", "", text)  # and HTML tags are not part of it
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a markdown text defines: its headings' slugs (a repeated one gets -1, -2, …) and HTML names."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(text, keep_code=True):  # a heading's code is part of its anchor
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(text: str) -> list[str]:
    """The targets of the links and images of a markdown text that point inside the repository."""
    targets = []
    for line in prose_lines(text):
        targets += INLINE_LINK.findall(line) + REFERENCE_LINK.findall(line) + HTML_LINK.findall(line)
    return [target for target in targets if target and not SCHEME.match(target)]


def broken_links(document: Path, root: Path) -> list[str]:
    """Each relative link of ``document`` whose file, or whose heading in a markdown file, does not exist."""
    broken = []
    for target in relative_links(document.read_text(encoding="utf-8")):
        path_part, _, anchor = target.partition("#")
        path_part = unquote(path_part)
        if not path_part:
            path = document
        elif path_part.startswith("/"):
            path = root / path_part.lstrip("/")
        else:
            path = document.parent / path_part
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.is_file() and path.suffix == ".md":
            if unquote(anchor) not in anchors(path.read_text(encoding="utf-8")):
                broken.append(f"{target}: no heading in {path.name} has the anchor #{anchor}")
    return broken


def test_the_readme_is_short() -> None:
    size = (REPO_ROOT / "README.md").stat().st_size
    assert size <= README_LIMIT, f"README.md is {size} bytes, over {README_LIMIT}: move details into docs/ and link to them"


@pytest.mark.parametrize("guide", GUIDES)
def test_each_guide_exists_and_the_readme_links_to_it(guide: str) -> None:
    assert (REPO_ROOT / guide).is_file(), f"{guide} is missing"
    assert guide in relative_links((REPO_ROOT / "README.md").read_text(encoding="utf-8")), f"README.md does not link to {guide}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=[d.relative_to(REPO_ROOT).as_posix() for d in DOCUMENTS])
def test_every_relative_link_resolves(document: Path) -> None:
    broken = broken_links(document, REPO_ROOT)
    assert not broken, f"{document.relative_to(REPO_ROOT)} has broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Threat model: what grading seals off", "threat-model-what-grading-seals-off"),
        ("Attention's cost on this CPU (notebook 06)", "attentions-cost-on-this-cpu-notebook-06"),
        ("`--no-sandbox`", "--no-sandbox"),
        ("Not under /tmp", "not-under-tmp"),
        (
            "With your own nbgrader: formgrader, the exchange and JupyterHub",
            "with-your-own-nbgrader-formgrader-the-exchange-and-jupyterhub",
        ),
        ("The `check_my_work` cell", "the-check_my_work-cell"),
        ("See [the guide](docs/x.md)", "see-the-guide"),
    ],
)
def test_slugs_follow_githubs_rules(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


FIXTURE = """# Top heading

[fine](other.md#real-heading), [also fine](#top-heading), [a folder](sub/), [the web](https://example.org/x.md),
![a picture](sub/picture.png), [the second one](other.md#real-heading-1).
[gone](missing.md) and [wrong anchor](other.md#no-such-heading) and [wrong here](#nowhere).
`[in code](nowhere.md)` is not a link.

```bash
echo "[in a fence](nowhere.md)"
```
"""


def test_the_link_checker_catches_a_broken_link_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "picture.png").write_bytes(b"")
    (tmp_path / "other.md").write_text("## Real heading\n\ntext\n\n## Real heading\n", encoding="utf-8")
    (tmp_path / "doc.md").write_text(FIXTURE, encoding="utf-8")
    assert broken_links(tmp_path / "doc.md", tmp_path) == [
        "missing.md: no such file",
        "other.md#no-such-heading: no heading in other.md has the anchor #no-such-heading",
        "#nowhere: no heading in doc.md has the anchor #nowhere",
    ]
