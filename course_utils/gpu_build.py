"""The child process that compiles kernels for a GPU: ``python -P course_utils/gpu_build.py``, a request per line.

Triton must be imported *without* its interpreter to compile: imported with ``TRITON_INTERPRET=1``
(as notebooks do on a CPU), its own library functions (``tl.sum``, ``tl.max``) are interpreted
ones, and compiling a kernel that calls them fails and leaves ``triton.language`` patched. So
``course_utils.gpu_compiler`` keeps one such process for a notebook's checks, sends each kernel's
source here, and reads back one JSON result per job.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

ARCHES = {"sm_80": 80, "sm_89": 89, "sm_90": 90}  # A100, L4 (Colab's paid GPU) and H100: what the kernels must build for


def _ptxas_report(ptx: str, arch: str) -> tuple[int | None, int | None]:
    """(registers, spilled bytes) from ptxas -v, the assembler Triton ships."""
    import triton

    tool = triton.knobs.nvidia.ptxas_blackwell if ARCHES[arch] >= 90 else triton.knobs.nvidia.ptxas
    gpu = "sm_90a" if ARCHES[arch] == 90 else arch  # Triton emits wgmma only for the "a" target
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w") as handle:
            handle.write(ptx)
        result = subprocess.run(
            [tool.path, "-v", f"--gpu-name={gpu}", source, "-o", os.path.join(folder, "kernel.cubin")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    report = result.stdout + result.stderr
    registers = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    return (int(registers.group(1)) if registers else None, int(spills.group(1)) if spills else None)


def _first_lines(error: BaseException, limit: int = 600) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    return text if len(text) <= limit else "... " + text[-limit:]  # Triton puts the source first, the reason last


def _load(source: str, name: str, folder: str) -> Any:
    """The kernel, from its source written to a file in ``folder`` (Triton reads a kernel's source from its file)."""
    path = os.path.join(folder, f"{name}_source.py")
    with open(path, "w") as handle:
        handle.write("import triton\nimport triton.language as tl\n\n" + source + "\n")
    spec = importlib.util.spec_from_file_location(f"{name}_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def build(job: dict[str, Any]) -> dict[str, Any]:
    """Compile one kernel (its source and its helpers' sources) for one GPU."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    result: dict[str, Any] = {"kernel": job["name"], "arch": job["arch"], "config": job["config"]}
    try:
        # The source file is needed only while the kernel compiles: no folder is left behind per build.
        with tempfile.TemporaryDirectory(prefix="gpu_build_") as folder:
            kernel = _load(job["source"], job["name"], folder)
            attrs = {tuple(key): value for key, value in job["attrs"]}
            source = ASTSource(fn=kernel, signature=job["signature"], constexprs=job["constexprs"], attrs=attrs)
            compiled = triton.compile(source, target=GPUTarget("cuda", ARCHES[job["arch"]], 32), options=job["options"])
    except Exception as error:  # noqa: BLE001 - any refusal of the compiler is the finding
        return {**result, "compiled": False, "error": _first_lines(error)}
    ptx = compiled.asm["ptx"]
    registers, spilled = _ptxas_report(ptx, job["arch"])
    mma = "wgmma" if "wgmma" in ptx else ("mma" if re.search(r"\bmma\.sync", ptx) else "")
    ttir = compiled.asm["ttir"]  # Triton's own IR, before any GPU lowering: one op per load or dot in the source
    return {
        **result,
        "compiled": True,
        "registers": registers,
        "spilled_bytes": spilled,
        "shared_bytes": int(compiled.metadata.shared),
        "mma": mma,
        "loads": len(re.findall(r"\btt\.(?:descriptor_)?load\b", ttir)),
        "dots": len(re.findall(r"\btt\.dot\b", ttir)),
    }


def reuse_installation_key(key: str) -> None:
    """Take the parent's key for this Triton installation instead of hashing it again (about 0.4 s).

    The parent runs the same Python, so the same Triton; Triton's own compile workers do the same.
    """
    import triton.runtime.cache

    if key and callable(getattr(triton.runtime.cache, "triton_key", None)):
        triton.runtime.cache.triton_key = lambda: key


def main() -> int:
    """Answer each request line (``{"triton_key": ..., "jobs": [...]}``) with a line of results, until stdin closes."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what Triton or a kernel's source prints goes to stderr, never into the answers
    for line in sys.stdin:
        request = json.loads(line)
        reuse_installation_key(request.get("triton_key", ""))
        answers.write(json.dumps([build(job) for job in request["jobs"]]) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
