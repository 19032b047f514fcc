"""Forbidden paths judged by what ran: autograd inside a gradient written by hand, a full recomputation
inside cached decoding, PyTorch's attention by any name. Each way through a hostile tester found loses the
test that names the skill; the honest version keeps it. Shown on the record and replay (in process, quick).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_stand_in_tripwires import record_and_replay, recorded_into

from course_utils.comparisons import CheckFailed

# --- 08: autograd inside softmax_backward or attention_backward --------------------------------------

HAND_SOFTMAX_BACKWARD = "def softmax_backward(P, dP):\n    return P * (dP - (P * dP).sum(-1, keepdim=True))\n"
# Ways to have PyTorch compute dS: each runs autograd's backward pass (or its formula) inside the graded call.
AUTOGRAD_SOFTMAX_BACKWARD = {
    "torch.autograd.grad": (
        "def softmax_backward(P, dP):\n"
        "    S = P.log().detach().requires_grad_()\n"
        "    with torch.enable_grad():\n"
        "        return torch.autograd.grad(torch.softmax(S, -1), S, dP)[0]\n"
    ),
    ".backward()": (
        "def softmax_backward(P, dP):\n"
        "    S = P.log().detach().requires_grad_()\n"
        "    with torch.enable_grad():\n"
        "        torch.softmax(S, -1).backward(dP)\n"
        "    return S.grad\n"
    ),
    "the engine by a built name": (
        "def softmax_backward(P, dP):\n"
        "    S = P.log().detach().requires_grad_()\n"
        "    with torch.enable_grad():\n"
        "        out = torch.softmax(S, -1)\n"
        "    engine = getattr(torch._C, '_Im' + 'perativeEngine')()\n"
        "    return engine.run_backward((out,), (dP,), False, False, (S,), False, True)[0]\n"
    ),
    "torch.func.vjp": (
        "def softmax_backward(P, dP):\n    _, pull = torch.func.vjp(lambda s: torch.softmax(s, -1), P.log())\n    return pull(dP)[0]\n"
    ),
    "a Function's backward": (
        "class _Trick(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, S):\n"
        "        ctx.save_for_backward(S)\n"
        "        return S.clone()\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        (S,) = ctx.saved_tensors\n"
        "        P = torch.softmax(S, -1)\n"
        "        return P * (g - (P * g).sum(-1, keepdim=True))\n"
        "def softmax_backward(P, dP):\n"
        "    S = P.log().requires_grad_()\n"
        "    with torch.enable_grad():\n"
        "        return torch.autograd.grad(_Trick.apply(S), S, dP)[0]\n"
    ),
    "PyTorch's backward formula by its op": (
        "def softmax_backward(P, dP):\n    return getattr(torch.ops.aten, '_softmax_backward' + '_data')(dP, P, -1, P.dtype)\n"
    ),
}
SOFTMAX_BACKWARD_TEST = (
    "import torch\n"
    "P = torch.softmax(torch.randn(3, 5, dtype=torch.float64), -1)\n"
    "dP = torch.randn(3, 5, dtype=torch.float64)\n"
    "want = P * (dP - (P * dP).sum(-1, keepdim=True))\n"
    "assert check_equal(call(softmax_backward, P, dP).allclose(want), True, label='softmax_backward')\n"
)


@pytest.mark.parametrize("route", AUTOGRAD_SOFTMAX_BACKWARD)
def test_autograd_inside_softmax_backward_fails_its_test(tmp_path: Path, route: str) -> None:
    notebook = "import torch\n" + AUTOGRAD_SOFTMAX_BACKWARD[route]
    with pytest.raises(CheckFailed) as failed:
        record_and_replay(tmp_path, notebook, ["softmax_backward"], SOFTMAX_BACKWARD_TEST)
    assert "while this test called it" in str(failed.value)
    assert "backward" in str(failed.value)


def test_a_hand_written_softmax_backward_keeps_its_test(tmp_path: Path) -> None:
    record_and_replay(tmp_path, "import torch\n" + HAND_SOFTMAX_BACKWARD, ["softmax_backward"], SOFTMAX_BACKWARD_TEST)


ATTENTION_BACKWARD_TEST = (
    "import torch\n"
    "from course_utils.checks import SOFTMAX_BACKWARD_STAND_IN, sdpa_gradients\n"
    "Q, K, V, dO = (torch.randn(1, 2, 4, 3, dtype=torch.float64) for _ in range(4))\n"
    "got = call(attention_backward, Q, K, V, dO, returns=3, stand_ins=SOFTMAX_BACKWARD_STAND_IN)\n"
    "assert check_equal([g.allclose(w) for g, w in zip(got, sdpa_gradients(Q, K, V, dO))], [True] * 3, label='attention_backward')\n"
)
HAND_ATTENTION_BACKWARD = (
    "import torch\n"
    "def attention_backward(Q, K, V, dO, scale=None, is_causal=False):\n"
    "    s = Q.shape[-1] ** -0.5\n"
    "    P = torch.softmax(Q @ K.transpose(-2, -1) * s, -1)\n"
    "    dS = softmax_backward(P, dO @ V.transpose(-2, -1)) * s\n"
    "    return dS @ K, dS.transpose(-2, -1) @ Q, P.transpose(-2, -1) @ dO\n"
    "def softmax_backward(P, dP):\n"
    "    raise NotImplementedError\n"
)


# The course's reference (declared to answer attention_backward: course_utils.tripwires.answers), and autograd.
ATTENTION_BACKWARD_BY_AUTOGRAD = {
    "the course's reference by a built name": (
        "import importlib\n"
        "def attention_backward(Q, K, V, dO, scale=None, is_causal=False):\n"
        "    refs = importlib.import_module('course_utils.autograd' + '_refs')\n"
        "    return getattr(refs, 'sdpa_' + 'gradients')(Q, K, V, dO, scale=scale, is_causal=is_causal)\n"
    ),
    "autograd of its own attention": (
        "import torch\n"
        "def attention_backward(Q, K, V, dO, scale=None, is_causal=False):\n"
        "    leaves = [t.detach().requires_grad_() for t in (Q, K, V)]\n"
        "    with torch.enable_grad():\n"
        "        out = torch.softmax(leaves[0] @ leaves[1].transpose(-2, -1) * Q.shape[-1] ** -0.5, -1) @ leaves[2]\n"
        "        return torch.autograd.grad(out, leaves, dO)\n"
    ),
}


@pytest.mark.parametrize("route", ATTENTION_BACKWARD_BY_AUTOGRAD)
def test_attention_backward_by_autograd_fails_its_test(tmp_path: Path, route: str) -> None:
    with pytest.raises(CheckFailed, match="while this test called it"):
        record_and_replay(
            tmp_path, ATTENTION_BACKWARD_BY_AUTOGRAD[route], ["attention_backward", "softmax_backward"], ATTENTION_BACKWARD_TEST
        )


def test_a_hand_written_attention_backward_on_the_stand_in_keeps_its_test(tmp_path: Path) -> None:
    # The stand-in softmax_backward is PyTorch's (the test's own): what it runs is not held against attention_backward.
    record_and_replay(tmp_path, HAND_ATTENTION_BACKWARD, ["attention_backward", "softmax_backward"], ATTENTION_BACKWARD_TEST)


def test_autograd_the_test_runs_around_a_hand_written_gradient_is_not_the_students(tmp_path: Path) -> None:
    # gradcheck differentiates the student's function (its backward pass is the test's), and a test's own
    # Function may call the student's function inside its backward: neither is autograd the student ran.
    test = (
        "import torch\n"
        "from course_utils.checks import check_gradcheck\n"
        "P = torch.softmax(torch.randn(2, 4, dtype=torch.float64), -1)\n"
        "dP = torch.randn(2, 4, dtype=torch.float64)\n"
        "assert check_gradcheck(softmax_backward, P, dP)\n"
        "class Outer(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, S):\n"
        "        ctx.P = torch.softmax(S, -1)\n"
        "        return ctx.P\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return call(softmax_backward, ctx.P, g)\n"
        "S = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)\n"
        "(got,) = torch.autograd.grad(Outer.apply(S), S, dP)\n"
        "(want,) = torch.autograd.grad(torch.softmax(S, -1), S, dP)\n"
        "assert check_equal(got.allclose(want), True, label='inside a backward pass')\n"
    )
    record_and_replay(tmp_path, "import torch\n" + HAND_SOFTMAX_BACKWARD, ["softmax_backward"], test)


# --- 09: a generate that makes the cached calls for show and recomputes ------------------------------

CACHED_GENERATE = (
    "import torch\n"
    "def generate(model, prompt, n_new, use_cache=True):\n"
    "    tokens, chosen = prompt, []\n"
    "    with torch.no_grad():\n"
    "        model.clear_cache()\n"
    "        logits = model(prompt, start_pos=0, use_cache=True)\n"
    "        for step in range(n_new):\n"
    "            LOGITS\n"
    "            chosen.append(logits[:, -1])\n"
    "            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)\n"
    "            logits = model(tokens[:, -1:], start_pos=tokens.shape[1] - 1, use_cache=True)\n"
    "    return tokens, torch.stack(chosen, dim=1)\n"
)
# Where the logits a token is chosen from come from: each a full recomputation, reached around the model's call.
RECOMPUTED = {
    "the class's forward": "logits = type(model).forward(model, tokens)",
    "a name built at run time": "logits = getattr(type(model), 'for' + 'ward')(model, tokens)",
    "the bound method, kept aside": "logits = model.__class__.__dict__['forward'].__get__(model)(tokens)",
    "a copy of the model": "logits = __import__('copy').deepcopy(model)(tokens)",
    "its blocks run by hand": ("x = model.embed(tokens); x = [x := b(x) for b in model.blocks][-1]; logits = model.head(model.norm(x))"),
}
USES_THE_CACHE = (
    "import torch\n"
    "from course_utils.checks import model_calls\n"
    "from course_utils.model_stand_ins import ReferenceLM\n"
    "torch.manual_seed(0)\n"
    "model = ReferenceLM(7, 8, 2, num_layers=1).eval()\n"
    "prompt = torch.randint(0, 7, (1, 3))\n"
    "calls = model_calls(model, call, generate, model, prompt, 3, returns=2)\n"
    "want = [{'tokens': [1, 3], 'start_pos': 0, 'use_cache': True}]\n"
    "want += [{'tokens': [1, 1], 'start_pos': 3 + i, 'use_cache': True} for i in range(3)]\n"
    "assert check_equal(str(calls), str(want), label='the calls of the model')\n"
)


@pytest.mark.parametrize("route", RECOMPUTED)
def test_a_recomputation_behind_cached_calls_fails_the_cache_test(tmp_path: Path, route: str) -> None:
    notebook = CACHED_GENERATE.replace("LOGITS", RECOMPUTED[route])
    with pytest.raises(CheckFailed) as failed:
        record_and_replay(tmp_path, notebook, ["generate"], USES_THE_CACHE)
    assert "the calls of the model: got" in str(failed.value)  # the recomputation is among the calls it counts


def test_a_generate_that_reads_its_cache_keeps_the_cache_test(tmp_path: Path) -> None:
    record_and_replay(tmp_path, CACHED_GENERATE.replace("LOGITS", "pass"), ["generate"], USES_THE_CACHE)


# --- PyTorch's attention by any name, where the skill is the attention -------------------------------

SDPA_ROUTES = {
    "a name built at run time": "getattr(torch.nn.functional, 'scaled_' + 'dot_product_attention')(Q, K, V)",
    "torch._C._nn": "torch._C._nn.scaled_dot_product_attention(Q, K, V)",
    "torch.ops.aten": "torch.ops.aten.scaled_dot_product_attention(Q, K, V)",
    "a backend's own op": "torch.ops.aten._scaled_dot_product_attention_math(Q, K, V)[0]",
    "a default bound before the test": "_bound(Q, K, V)",
}
NO_SDPA_TEST = (
    "import torch\n"
    "Q, K, V = (torch.randn(2, 3, 4) for _ in range(3))\n"
    "BUILTINS = ['torch.nn.functional.scaled_dot_product_attention', 'torch.nn.functional.multi_head_attention_forward']\n"
    "assert check_no_builtin(scaled_dot_product_attention, Q, K, V, builtins=BUILTINS, label='attention')\n"
)


@pytest.mark.parametrize("route", SDPA_ROUTES)
def test_pytorchs_attention_by_any_route_fails_the_no_builtin_test(tmp_path: Path, route: str) -> None:
    notebook = (
        "import torch\n_bound = torch.nn.functional.scaled_dot_product_attention\n"
        f"def scaled_dot_product_attention(Q, K, V):\n    return {SDPA_ROUTES[route]}\n"
    )
    with pytest.raises(CheckFailed, match="scaled_dot_product_attention"):
        record_and_replay(
            tmp_path, notebook, ["scaled_dot_product_attention"], "from course_utils.checks import check_no_builtin\n" + NO_SDPA_TEST
        )


def test_attention_written_out_passes_the_no_builtin_test(tmp_path: Path) -> None:
    notebook = (
        "import torch\n"
        "def scaled_dot_product_attention(Q, K, V):\n"
        "    return torch.softmax(Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5, dim=-1) @ V\n"
    )
    record_and_replay(
        tmp_path, notebook, ["scaled_dot_product_attention"], "from course_utils.checks import check_no_builtin\n" + NO_SDPA_TEST
    )


# --- runtime evidence for review: a tripwire that fired is named, whatever the source text says ------


def test_a_fired_tripwire_is_runtime_evidence_on_the_verdict_and_the_report(tmp_path: Path) -> None:
    import nbformat

    from autograder.grading.run_report import RunReport
    from autograder.grading.verdicts import decide
    from course_utils import checks, recording

    solution = "def softmax_backward(P, dP):\n    raise NotImplementedError\n"
    test = "from course_utils.checks import call, check_equal\n" + SOFTMAX_BACKWARD_TEST
    cells = [nbformat.v4.new_code_cell("import torch"), nbformat.v4.new_code_cell(solution), nbformat.v4.new_code_cell(test)]
    cells[1].metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "softmax_backward", "locked": False}
    cells[2].metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": "test_sb", "points": 1, "locked": True}
    source = nbformat.v4.new_notebook(cells=cells)
    for student, evidence in ((AUTOGRAD_SOFTMAX_BACKWARD["torch.autograd.grad"], True), (HAND_SOFTMAX_BACKWARD, False)):
        namespace: dict = {"__name__": "__main__", "call": checks.call}
        exec("import torch\n" + student, namespace)  # noqa: S102 - the test's own notebook code
        with recorded_into(tmp_path / "record", ["softmax_backward"], namespace):
            recording.begin_cell("test_sb")
            exec(test, namespace)  # noqa: S102 - the sealed run compares nothing
        (verdict,) = decide(source, (tmp_path / "record").read_bytes(), {}).values()
        assert verdict.passed is not evidence
        assert bool(verdict.evidence) is evidence and all("autograd's backward pass" in line for line in verdict.evidence)
        again = RunReport(True, "completed", verdicts=(verdict,))
        assert RunReport.from_json(again.to_json()).verdicts == (verdict,), "the evidence crosses to the worker"
