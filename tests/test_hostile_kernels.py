"""Issue 53: the kernel and tile checks judge the student's objects, never their names.

Each way through a hostile review found is run here against the check a hidden test makes (on small inputs, in
Triton's interpreter), and must now fail it; beside each, the honest variants it must not catch: pointers with
any names, a helper kernel, a clone the algorithm needs, ``kernel[grid]`` launches.
"""

from __future__ import annotations

import ctypes
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from course_utils.execution_checks import check_kernel_outputs, check_reads_at_most, check_rows_read  # noqa: E402
from course_utils.kernel_trace import returned_by_kernels, trace_kernels  # noqa: E402
from course_utils.kernels import tl, triton  # noqa: E402
from course_utils.tensor_reads import elements_read  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a kernel trace is taken in Triton's interpreter")
BLOCK = 16


@triton.jit
def renamed_attention(Qm, Kp, Vp, Om, Lm, K2, T_q, T_k, scale, IS_CAUSAL: tl.constexpr, SKIP: tl.constexpr, TWO_PASSES: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """Attention for BLOCK queries of one head of contiguous [BH, T, D] tensors; no pointer is called Q, K or V.
    SKIP: skip the key blocks past the diagonal; TWO_PASSES: the statistics first, from K2, then the output."""
    pid, bh = tl.program_id(0), tl.program_id(1)
    rows, cols, dims = pid * BLOCK + tl.arange(0, BLOCK), tl.arange(0, BLOCK), tl.arange(0, D)
    q = tl.load(Qm + bh * T_q * D + rows[:, None] * D + dims[None, :], mask=rows[:, None] < T_q, other=0.0)
    end = T_k
    if IS_CAUSAL and SKIP:
        end = tl.minimum(T_k, (pid + 1) * BLOCK)
    m = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK], dtype=tl.float32)
    acc = tl.zeros([BLOCK, D], dtype=tl.float32)
    if TWO_PASSES:
        for start in range(0, end, BLOCK):
            keys = start + cols
            k = tl.load(K2 + bh * T_k * D + keys[None, :] * D + dims[:, None], mask=keys[None, :] < T_k, other=0.0)
            allowed = (keys[None, :] < T_k) & ((keys[None, :] <= rows[:, None]) | (not IS_CAUSAL))
            s = tl.where(allowed, tl.dot(q, k) * scale, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            l = l * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), 1)
            m = m_new
    for start in range(0, end, BLOCK):
        keys = start + cols
        k = tl.load(Kp + bh * T_k * D + keys[None, :] * D + dims[:, None], mask=keys[None, :] < T_k, other=0.0)
        v = tl.load(Vp + bh * T_k * D + keys[:, None] * D + dims[None, :], mask=keys[:, None] < T_k, other=0.0)
        allowed = (keys[None, :] < T_k) & ((keys[None, :] <= rows[:, None]) | (not IS_CAUSAL))
        s = tl.where(allowed, tl.dot(q, k) * scale, float("-inf"))
        if TWO_PASSES:
            acc += tl.dot(tl.exp(s - m[:, None]), v)
        else:
            m_new = tl.maximum(m, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            l = l * tl.exp(m - m_new) + tl.sum(p, 1)
            acc = acc * tl.exp(m - m_new)[:, None] + tl.dot(p, v)
            m = m_new
    tl.store(Om + bh * T_q * D + rows[:, None] * D + dims[None, :], acc / l[:, None], mask=rows[:, None] < T_q)
    tl.store(Lm + bh * T_q + rows, m + tl.log(l), mask=rows < T_q)


@triton.jit
def copy_kernel(SRC, DST, n, BLOCK: tl.constexpr):
    """DST[i] = SRC[i]: a helper kernel (a contiguous copy), or a way to put another's answer where a kernel should."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(DST + offsets, tl.load(SRC + offsets, mask=offsets < n), mask=offsets < n)


def _impostor():
    @triton.jit
    def renamed_attention(SRC, DST, n, BLOCK: tl.constexpr):  # the graded kernel's __name__, another kernel
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(DST + offsets, tl.load(SRC + offsets, mask=offsets < n), mask=offsets < n)

    return renamed_attention


IMPOSTOR = _impostor()


def attention(skip=True, two_passes=False, second=lambda K: K, keys=lambda K: K, prescaled=False):
    """A launcher of renamed_attention: ``second(K)`` is what the first of two passes reads, ``keys(K)`` what the kernel
    is given as its keys; ``prescaled``: the queries are given times the scale (values that are not Q's)."""

    def launcher(Q, K, V, is_causal=False):
        B, H, T_q, d = Q.shape
        O, L = torch.empty_like(Q), torch.empty(B, H, T_q)
        grid = (triton.cdiv(T_q, BLOCK), B * H)
        K_given, scale = keys(K), d**-0.5
        Q, scale = (Q * scale, 1.0) if prescaled else (Q, scale)
        renamed_attention[grid](Q, K_given, V, O, L, second(K), T_q, K.shape[2], scale, IS_CAUSAL=is_causal, SKIP=skip, TWO_PASSES=two_passes, D=d, BLOCK=BLOCK)  # fmt: skip
        return O, L

    return launcher


def kernel_copy(K):
    """K copied by a helper kernel, as a launcher that wants its own contiguous keys may."""
    copy = torch.empty_like(K)
    copy_kernel[(triton.cdiv(K.numel(), 64),)](K, copy, K.numel(), BLOCK=64)
    return copy


def qkv(T_q, T_k, d=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 2, T, d, generator=generator) for T in (T_q, T_k, T_k))


def check_one_pass(launcher, T_q=20, T_k=48, d=16):
    """What 07's test_flash_attention_triton_one_pass checks: Q, K and V read once, all of K and V, O and L never."""
    Q, K, V = qkv(T_q, T_k, d)
    O, _ = launcher(Q, K, V)
    torch.testing.assert_close(O, torch.nn.functional.scaled_dot_product_attention(Q, K, V), atol=1e-4, rtol=1e-4)
    trace = trace_kernels(launcher, Q, K, V, watch={"Q": Q, "K": K, "V": V}, outputs=("O", "L"))
    check_reads_at_most(trace, "renamed_attention", {"Q": 1, "K": 1, "V": 1, "O": 0, "L": 0}, label="one pass")
    for role in ("K", "V"):
        check_rows_read(
            trace, "renamed_attention", role, allowed=lambda p: (0, T_k - 1), needed=lambda p: T_k * d, exactly=True, label="one pass"
        )
    return True


def check_skipping(launcher, T_q=32, T_k=64):
    """What 07's test_flash_attention_triton_skips_masked_blocks checks of the key rows each program reads."""
    Q, K, V = qkv(T_q, T_k)
    trace = trace_kernels(lambda *a: launcher(*a, is_causal=True), Q, K, V, watch={"Q": Q, "K": K, "V": V}, outputs=("O", "L"))

    def keys_in_tiles(p):  # the same bound as the hidden test: by the rows of O it wrote (else of Q it read)
        queries = p.wrote("O").rows or p.read("Q").rows
        return T_k if queries is None else min(T_k, -(-((queries[0] // BLOCK + 1) * BLOCK) // BLOCK) * BLOCK)

    return check_rows_read(trace, "renamed_attention", "K", allowed=lambda p: (0, keys_in_tiles(p) - 1), needed=lambda p: 0, label="skip")


# --- honest variants keep the points -------------------------------------------------------------------------


def test_pointers_with_any_names_pass_the_one_pass_and_skip_checks():
    assert check_one_pass(attention())  # Qm, Kp, Vp, Om, Lm: no parameter is called Q, K or V
    assert check_skipping(attention())
    assert check_one_pass(attention(prescaled=True)) and check_skipping(attention(prescaled=True))


def test_a_clone_or_a_helper_kernels_copy_that_the_kernel_reads_once_passes():
    assert check_one_pass(attention(keys=lambda K: K.clone()))
    assert check_one_pass(attention(keys=kernel_copy))


# --- ways through, closed ------------------------------------------------------------------------------------


def test_a_kernel_whose_query_pointer_has_another_name_is_judged_by_the_queries_it_read():
    with pytest.raises(AssertionError, match=r"read rows 0\.\.63 of K; this program needs rows 0\.\.15 at most"):
        check_skipping(attention(skip=False))  # every key block loaded, then masked: no name to hide behind
    with pytest.raises(AssertionError, match=r"read rows 0\.\.63 of K"):  # nor queries given as values Q never held
        check_skipping(attention(skip=False, prescaled=True))


def test_a_second_pass_through_a_clone_reads_the_keys_twice():
    with pytest.raises(AssertionError, match=r"element reads of K for \d+ distinct elements: 2\.00 reads each"):
        check_one_pass(attention(two_passes=True, second=lambda K: K.clone()))
    with pytest.raises(AssertionError, match=r"2\.00 reads each"):  # the copy made by a helper kernel, too
        check_one_pass(attention(two_passes=True, second=kernel_copy))


def test_a_kernel_given_the_graded_kernels_name_is_not_the_graded_kernel():
    def for_show(Q, K, V):
        O, L = attention()(Q, K, V)  # the graded kernel runs, for show
        answer = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
        IMPOSTOR[(triton.cdiv(O.numel(), 64),)](answer, O, O.numel(), BLOCK=64)  # its __name__ is renamed_attention
        return O, L

    Q, K, V = qkv(20, 32)
    returned = returned_by_kernels(for_show, Q, K, V)
    with pytest.raises(AssertionError, match=r"of which 0 hold what renamed_attention stored there \(\d+ from IMPOSTOR\)"):
        check_kernel_outputs(returned, "renamed_attention", label="impostor")
    trace = trace_kernels(for_show, Q, K, V, watch={"Q": Q, "K": K, "V": V})
    assert [launch.names for launch in trace.launches] == [("renamed_attention",), ("IMPOSTOR",)]
    assert len(trace.of("renamed_attention")) == 1  # the impostor's launch is not the graded kernel's


@triton.jit
def atomic_reader(X, BITS, OUT, BLOCK: tl.constexpr):
    """Reads X three times, every time through an atomic: an add of 0, an exchange, and a compare-and-swap that never
    swaps, through BITS, X's memory seen as integers."""
    offsets = tl.arange(0, BLOCK)
    a = tl.atomic_add(X + offsets, 0.0)
    b = tl.atomic_xchg(BITS + offsets, a.to(tl.int32, bitcast=True))  # writes back the bits it read
    c = tl.atomic_cas(BITS + offsets, tl.full([BLOCK], 7, tl.int32), tl.zeros([BLOCK], tl.int32))
    tl.store(OUT + offsets, a + b.to(tl.float32, bitcast=True) + c.to(tl.float32))


def test_atomics_read_what_they_change():
    x = torch.randn(BLOCK)
    trace = trace_kernels(lambda x: atomic_reader[(1,)](x, x.view(torch.int32), torch.empty(BLOCK), BLOCK=BLOCK), x, watch={"X": x})
    [program] = trace.of("atomic_reader")[0].programs
    assert (program.read("X").elements, program.read("X").distinct, program.read("X").fewest) == (3 * BLOCK, BLOCK, 3)
    with pytest.raises(AssertionError, match=r"3\.00 reads each"):
        check_reads_at_most(trace, "atomic_reader", {"X": 1}, label="atomics")


@triton.jit
def softmax_row_kernel(X, OUT, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    """For show: writes nothing (the launcher fills OUT with PyTorch)."""
    pass


@triton.jit
def write_back_kernel(X, OUT, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    """For show: stores what OUT already holds (PyTorch's answer) back into it."""
    cols = tl.arange(0, BLOCK)
    row = OUT + tl.program_id(0) * stride_out + cols
    tl.store(row, tl.load(row, mask=cols < n_cols), mask=cols < n_cols)


def softmax_for_show(kernel):
    def softmax_rows(x):
        out = torch.softmax(x, dim=-1)
        kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK=16)
        return out

    return softmax_rows


def test_a_softmax_launcher_that_fills_the_output_itself_loses_test_softmax_rows():
    x = torch.randn(5, 13)
    with pytest.raises(AssertionError, match="of which 0 hold what softmax_row_kernel stored there"):
        check_kernel_outputs(returned_by_kernels(softmax_for_show(softmax_row_kernel), x), "softmax_row_kernel", label="empty")
    trace = trace_kernels(softmax_for_show(write_back_kernel), x, watch={"X": x}, outputs=("OUT",))
    with pytest.raises(AssertionError, match="read 0 distinct elements of X"):  # what 07's hidden test_softmax_rows checks
        check_rows_read(trace, "write_back_kernel", "X", allowed=lambda p: (p.pid[0], p.pid[0]), needed=lambda p: 13, label="back")


@triton.jit
def probe_kernel(FLAG):
    tl.store(FLAG, 1.0)


@triton.jit
def first_blocks(X, n, BLOCK: tl.constexpr):
    for start in range(0, 1 << 20, BLOCK):
        if start >= n:
            break  # the interpreter accepts this; Triton's GPU compiler does not
        tl.store(X + start + tl.arange(0, BLOCK), 1.0)


@triton.jit
def fill_kernel(X, n, BLOCK: tl.constexpr):
    tl.store(X + tl.arange(0, BLOCK), 1.0, mask=tl.arange(0, BLOCK) < n)


def test_a_launcher_cannot_tell_the_gpu_build_check_from_a_graded_run():
    from course_utils.checks import check_builds_for_gpu

    def fill(x):
        flag = torch.zeros(1)
        probe_kernel[(1,)](flag)
        if flag.item() == 1.0:  # the kernels ran: a graded run, launch the kernel that no GPU compiles
            first_blocks[(1,)](x, x.numel(), BLOCK=16)
        else:  # a capture that runs nothing: launch one that compiles
            fill_kernel[(1,)](x, x.numel(), BLOCK=16)
        return x

    with pytest.raises(AssertionError, match="first_blocks does not compile for sm_90"):
        check_builds_for_gpu(fill, torch.zeros(16))


# --- PyTorch tiles: reads counted by memory and values, at the dispatcher -----------------------------------


def tiles(Q, K):
    return [Q @ K[start : start + 4].T for start in range(0, K.shape[0], 4)]


def through_ctypes(Q, K):
    copy = torch.empty_like(K)
    ctypes.memmove(copy.data_ptr(), K.data_ptr(), K.numel() * K.element_size())
    return tiles(Q, K) + tiles(Q, copy)


def through_the_storage(Q, K):
    copy = torch.empty(0).set_(K.untyped_storage().clone()).view(K.shape)
    return tiles(Q, K) + tiles(Q, copy)


def with_torch_functions_disabled(Q, K):
    with getattr(torch._C, "DisableTorchFunction")():
        second = tiles(Q, K)
    return tiles(Q, K) + second


@pytest.mark.parametrize("fn", [through_ctypes, through_the_storage, with_torch_functions_disabled])
def test_a_second_pass_out_of_sight_of_torch_functions_is_counted(fn):
    Q, K = torch.randn(5, 8), torch.randn(12, 8)
    assert elements_read(fn, Q, K, watch={"K": K}) == {"K": 192}  # two passes of 96


@triton.jit
def through_scratch(X, S, OUT, n, KEEP_X: tl.constexpr, BLOCK: tl.constexpr):
    """Reads its row of X once, puts the row (KEEP_X) or its exponentials in scratch S, and reads S back for OUT."""
    cols = tl.arange(0, BLOCK)
    offsets = tl.program_id(0) * n + cols
    x = tl.load(X + offsets, mask=cols < n, other=float("-inf"))
    tl.store(S + offsets, x if KEEP_X else tl.exp(x - tl.max(x, 0)), mask=cols < n)
    again = tl.load(S + offsets, mask=cols < n, other=0.0)  # a second pass over X's values, or over what it computed
    if KEEP_X:
        again = tl.where(cols < n, tl.exp(again - tl.max(x, 0)), 0.0)
    tl.store(OUT + offsets, again / tl.sum(again, 0), mask=cols < n)


@pytest.mark.parametrize("keep_x, reads", [(True, 2), (False, 1)])
def test_a_copy_a_kernel_makes_of_its_input_and_reads_back_is_its_input(keep_x, reads):
    x = torch.randn(3, 13)

    def softmax(x):
        out, scratch = torch.empty_like(x), torch.empty_like(x)
        through_scratch[(3,)](x, scratch, out, 13, KEEP_X=keep_x, BLOCK=16)
        return out

    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1))
    trace = trace_kernels(softmax, x, watch={"X": x}, outputs=("OUT",))
    assert [(p.read("X").elements, p.read("X").fewest) for p in trace.of("through_scratch")[0].programs] == [(13 * reads, reads)] * 3


@triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])  # one config: the interpreter cannot time several
@triton.jit
def tuned_double(X, OUT, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(OUT + offsets, 2 * tl.load(X + offsets, mask=offsets < n), mask=offsets < n)


def test_an_autotuned_kernel_started_with_launch_is_the_notebooks_kernel_and_builds():
    from course_utils.checks import check_builds_for_gpu
    from course_utils.kernels import launch

    def double(x):
        out = torch.empty_like(x)
        launch(tuned_double, lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),), x, out, x.numel())
        return out

    x = torch.randn(50)
    trace = trace_kernels(double, x, watch={"X": x}, outputs=("OUT",))
    assert [(launch.names, launch.constexprs) for launch in trace.launches] == [(("tuned_double",), {"BLOCK": 16})]
    assert check_reads_at_most(trace, "tuned_double", {"X": 1, "OUT": 0}, label="tuned")
    assert check_kernel_outputs(returned_by_kernels(double, x), "tuned_double", label="tuned")
    assert check_builds_for_gpu(double, x)


# --- a graded name is the kernel the graded cell made, whatever a later cell binds to it ----------------------


@pytest.fixture
def graded_cell(monkeypatch):
    """The sealed run's record of graded cells, simulated: ``graded_cell(namespace, *names)`` runs as the sealed run
    does around a graded cell; the caller binds the cell's objects in between (``recording.end_graded_cell``)."""
    from course_utils import recording

    def run(namespace, *names, **bound):
        monkeypatch.setattr(recording._state, "namespace", namespace)
        monkeypatch.setattr(recording._state, "graded", names)
        before = recording.graded_bindings()
        namespace.update(bound)
        recording.end_graded_cell(before)

    monkeypatch.setattr(recording._state, "made", {})
    return run


def answer_copied_by(kernel_of):
    """A launcher that computes the answer with PyTorch and has ``kernel_of()`` copy it into O: the cheat a later cell
    binds to the graded kernel's name."""

    def launcher(Q, K, V):
        O, answer = torch.empty_like(Q), torch.nn.functional.scaled_dot_product_attention(Q, K, V)
        kernel_of()[(triton.cdiv(O.numel(), 64),)](answer, O, O.numel(), BLOCK=64)
        return O

    return launcher


def test_a_kernel_a_later_cell_binds_to_the_graded_name_is_not_the_graded_kernel(graded_cell):
    renamed_attention = IMPOSTOR  # a later cell: the graded kernel's name now holds a copy kernel
    launcher = answer_copied_by(lambda: renamed_attention)
    Q, K, V = qkv(20, 32)
    assert check_kernel_outputs(returned_by_kernels(launcher, Q, K, V), "renamed_attention", label="by name")  # the way through
    graded_cell({}, "renamed_attention", renamed_attention=globals()["renamed_attention"])  # what the graded cell made
    with pytest.raises(AssertionError, match=r"of which 0 hold what renamed_attention stored there \(\d+ from IMPOSTOR\)"):
        check_kernel_outputs(returned_by_kernels(launcher, Q, K, V), "renamed_attention", label="rebound")
    trace = trace_kernels(launcher, Q, K, V, watch={"Q": Q, "K": K, "V": V}, outputs=("O",))
    assert [launch.names for launch in trace.launches] == [("IMPOSTOR",)]
    with pytest.raises(AssertionError, match=r"did not launch the notebook's renamed_attention \(kernels launched: IMPOSTOR\)"):
        check_reads_at_most(trace, "renamed_attention", {"K": 1}, label="rebound")


LATER_CELL = """
@triton.jit
def renamed_attention(SRC, DST, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(DST + offsets, tl.load(SRC + offsets, mask=offsets < n), mask=offsets < n)
"""


def test_a_kernel_redefined_under_the_graded_name_by_a_later_cell_is_nobodys(graded_cell, monkeypatch):
    import linecache

    namespace = {"triton": triton, "tl": tl}  # the notebook's
    source = (len(LATER_CELL), None, LATER_CELL.splitlines(True), "<later cell>")
    monkeypatch.setitem(linecache.cache, "<later cell>", source)  # as IPython keeps a cell's source, for Triton to read
    graded_cell(namespace, "renamed_attention", renamed_attention=globals()["renamed_attention"])
    exec(compile(LATER_CELL, "<later cell>", "exec"), namespace)  # noqa: S102 - `@triton.jit def renamed_attention` again
    launcher = answer_copied_by(lambda: namespace["renamed_attention"])
    Q, K, V = qkv(20, 32)
    trace = trace_kernels(launcher, Q, K, V, watch={"Q": Q, "K": K, "V": V}, outputs=("O",))
    assert [launch.names for launch in trace.launches] == [()]  # the notebook's name holds it, but it is not the graded one
    with pytest.raises(AssertionError, match=r"kernels launched: renamed_attention \(a kernel no name of the notebook holds"):
        check_rows_read(trace, "renamed_attention", "K", allowed=lambda p: (0, 31), needed=lambda p: 0, label="redefined")


def test_the_graded_cells_kernel_keeps_its_points_however_the_cell_ran(graded_cell):
    namespace = {}
    graded_cell(namespace, "renamed_attention", "launcher", renamed_attention=IMPOSTOR)  # the graded cell's first run
    # Run again, now with the kernel and its launcher in the one cell: the last run's objects count.
    graded_cell(namespace, "renamed_attention", "launcher", renamed_attention=globals()["renamed_attention"], launcher=attention())
    assert check_one_pass(attention()) and check_skipping(attention())
    assert check_one_pass(attention(keys=kernel_copy))  # a helper kernel beside it is judged by its names


def test_an_autotuned_kernel_the_graded_cell_made_is_the_graded_kernel(graded_cell):
    graded_cell({}, "tuned_double", tuned_double=tuned_double)
    test_an_autotuned_kernel_started_with_launch_is_the_notebooks_kernel_and_builds()


def test_the_sealed_run_keeps_what_each_graded_cell_bound(tmp_path, monkeypatch):
    import signal

    from autograder.grading import sealed_run
    from course_utils import recording

    class Shell:
        user_ns: dict = {}

        def run_cell(self, source, store_history=False):
            exec(source, self.user_ns)  # noqa: S102 - the test's own cells

        def showtraceback(self, *args):
            raise AssertionError("a cell raised")

    cells = [
        {"source": "def kernel(): return 'first run'", "solution": "kernel_cell"},
        {"source": "def kernel(): return 'graded'\ndef launcher(): return kernel()", "solution": "kernel_cell"},
        {"source": "graded = kernel\ndef kernel(): return 'later'", "solution": ""},
    ]
    monkeypatch.setattr(recording, "_state", recording._State())
    monkeypatch.setenv(recording.RECORD_FILE_ENV, str(tmp_path / "record"))
    monkeypatch.setenv(recording.GRADED_NAMES_ENV, "")
    shell, out, alarm = Shell(), os.open(os.devnull, os.O_WRONLY), signal.getsignal(signal.SIGALRM)
    try:
        request = {"cells": [{"index": i, "test": "", **cell} for i, cell in enumerate(cells)], "graded": "kernel,launcher", "timeout": 30}
        sealed_run.run_cells(shell, request, out)
    finally:
        os.close(out)
        signal.signal(signal.SIGALRM, alarm)
    made = recording.made_by_graded_cells()
    assert made == {"kernel": shell.user_ns["graded"], "launcher": shell.user_ns["launcher"]}
    assert made["kernel"]() == "graded" and shell.user_ns["kernel"]() == "later"


def test_the_graded_kernel_run_again_from_the_same_code_is_still_the_graded_kernel(graded_cell, monkeypatch):
    """A student who copies the graded cell into another one while experimenting keeps their points; another kernel
    under the name does not become the graded one."""
    import inspect
    import linecache

    from course_utils.kernel_trace import kernel_names

    graded_cell({}, "renamed_attention", renamed_attention=globals()["renamed_attention"])
    for text, graded in (
        ("# tried again\n\n" + inspect.getsource(globals()["renamed_attention"].fn), True),
        (LATER_CELL, False),
    ):
        namespace = {"triton": triton, "tl": tl}
        monkeypatch.setitem(linecache.cache, "<copied cell>", (len(text), None, text.splitlines(True), "<copied cell>"))
        exec(compile(text, "<copied cell>", "exec"), namespace)  # noqa: S102 - `@triton.jit def renamed_attention`
        again = namespace["renamed_attention"]
        assert kernel_names(again.fn, {"renamed_attention": again}) == (("renamed_attention",) if graded else ())


def test_a_watched_tensor_of_few_values_is_known_by_its_memory_alone():
    """Value matching needs values a buffer would not hold by chance: a constant K makes no buffer of ones its copy."""
    from course_utils.watched import Watched, as_values

    K = torch.randn(4, 8)
    assert Watched("K", K).copied_in(as_values(K.clone().t()), torch.float32)  # random values: a copy is known
    constant = torch.ones(4, 8)
    assert not Watched("K", constant).copied_in(as_values(torch.ones(16)), torch.float32)
    tiny = torch.randn(3)
    assert Watched("K", tiny).copied_in(as_values(torch.cat([tiny, torch.zeros(2)])), torch.float32)
