"""Insert the proposed showcase cells into a copy of notebook 08's solution (or, when its owner is ready, the notebook itself).

    .venv/bin/python benchmarks/drafts/fast_backward/insert_cells.py PATH/TO/08_flash_backward.ipynb

They go after section 7's GPU timing cell (the code cell after "### On a GPU: what the backward costs"), before
section 8's lab: the markdown cell (visible to students), the kernels and launcher (showcase, grade_id
flash_attention_backward_fast), the Function (showcase, grade_id FlashAttentionFast) and the demo (showcase, no
nbgrader metadata). Written as the rules of the shared tree ask: json load, new cells, dump with indent=1,
ensure_ascii=False and a trailing newline. Run ruff format on the notebook afterwards, then the release.
"""

import json
import sys
from pathlib import Path

CELLS = Path(__file__).resolve().parent / "cells"


def source(text: str) -> list[str]:
    lines = text.rstrip("\n").splitlines(keepends=True)
    return lines


def showcase(grade_id: str | None) -> dict:
    meta = {"tags": ["showcase"]}
    if grade_id:
        meta = {
            "nbgrader": {"grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3, "solution": True, "task": False},
            **meta,
        }
    return meta


def main(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    if any(c.get("id") == "fast-backward-showcase" for c in nb["cells"]):
        raise SystemExit("already inserted")
    heading = next(
        i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown" and "On a GPU: what the backward costs" in "".join(c["source"])
    )
    at = heading + 2  # after the timing cell that follows the heading
    code = lambda cell_id, name, meta: {  # noqa: E731
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": meta,
        "outputs": [],
        "source": source((CELLS / name).read_text()),
    }
    new = [
        {
            "cell_type": "markdown",
            "id": "fast-backward-showcase",
            "metadata": {},
            "source": source((CELLS / "01_fast_backward_intro.md").read_text()),
        },
        code("fast-backward-kernels", "02_flash_attention_backward_fast.py", showcase("flash_attention_backward_fast")),
        code("fast-backward-function", "03_FlashAttentionFast.py", showcase("FlashAttentionFast")),
        code("fast-backward-demo", "04_demo.py", showcase(None)),
    ]
    nb["cells"][at:at] = new
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"inserted 4 cells at {at} in {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
