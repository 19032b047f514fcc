"""course_utils.memory and course_utils.timing: the measurements notebook 06 and the benchmark rely on."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F

from course_utils.memory import peak_tensor_bytes, track_tensor_memory
from course_utils.operators import aten_operators
from course_utils.timing import median_seconds

MIB = 2**20


def test_one_new_tensor_is_counted_once_and_inputs_are_not():
    x = torch.zeros(256, 1024)  # 1 MiB, created before the block: not counted
    peak = peak_tensor_bytes(lambda t: t + 1, x)
    assert peak == MIB


def test_views_share_their_base_storage():
    def make_views(x):
        y = x * 2  # 1 MiB
        return y[:10], y.view(-1), y.T  # views: no new storage

    assert peak_tensor_bytes(make_views, torch.zeros(256, 1024)) == MIB


def test_freed_temporaries_do_not_add_up_but_live_ones_do():
    x = torch.zeros(256, 1024)

    def one_at_a_time(t):
        total = torch.zeros(())
        for _ in range(4):
            total = total + (t * 2).sum()  # each 1 MiB temporary dies before the next
        return total

    def all_at_once(t):
        kept = [t * 2 for _ in range(4)]  # four 1 MiB tensors alive together
        return sum(k.sum() for k in kept)

    assert MIB <= peak_tensor_bytes(one_at_a_time, x) < 1.1 * MIB
    assert 4 * MIB <= peak_tensor_bytes(all_at_once, x) < 4.1 * MIB


def test_in_place_ops_allocate_nothing_new():
    x = torch.zeros(256, 1024)
    assert peak_tensor_bytes(lambda t: t.add_(1).mul_(2), x) == 0


def test_report_tracks_live_bytes_and_largest_tensor():
    x = torch.zeros(8)
    with track_tensor_memory(x) as report:
        big = torch.zeros(1024, 1024)  # 4 MiB
        small = torch.ones(1024)  # 4 KiB
        del big
    assert report.largest_tensor_bytes == 4 * MIB
    assert report.peak_bytes == 4 * MIB + 4096
    assert report.live_bytes == 4096, "the small tensor is still alive, the big one is not"
    del small


def test_quadratic_attention_peaks_at_two_score_matrices():
    T, d = 512, 16
    q = torch.randn(1, T, d)

    def naive(q):
        return torch.softmax(q @ q.transpose(-2, -1), dim=-1) @ q

    scores = T * T * 4
    assert 2 * scores <= peak_tensor_bytes(naive, q) <= 2 * scores + 2 * T * d * 4


def test_every_way_of_making_a_tensor_is_seen():
    """Factories, tensor methods, operators and functional calls, also inside a helper of the student's."""
    x = torch.zeros(256, 1024)

    def helper(t):
        return F.relu(t) + 1  # two 1 MiB results, one alive at the end

    def made(t):
        kept = [torch.empty(256, 1024), torch.full((256, 1024), 2.0), torch.zeros_like(t), t.clone(), t.exp(), t @ t.T[:, :256]]
        kept.append(helper(t))
        return kept

    assert 7 * MIB <= peak_tensor_bytes(made, x) <= 8 * MIB


def test_what_one_call_frees_before_it_returns_is_not_seen():
    """The documented limits: temporaries inside one composite call, and code outside Python's reach."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 512, 64)
    scores = 2 * 512 * 512 * 4  # [1, 2, 512, 512] float32: what the math backend makes and frees inside

    def naive(q):
        return torch.softmax(q @ q.transpose(-2, -1), dim=-1) @ q

    assert peak_tensor_bytes(naive, q) >= 2 * scores  # written with tensor operations: seen
    with sdpa_kernel(SDPBackend.MATH):
        assert peak_tensor_bytes(F.scaled_dot_product_attention, q, q, q) < scores / 4
    with pytest.warns(DeprecationWarning):  # torch 2.13 deprecates TorchScript; students may still reach for it
        scripted = torch.jit.script(naive)
    assert peak_tensor_bytes(scripted, q) < scores / 4  # the grader flags torch.jit for review instead


def test_torch_func_wrappers_are_skipped_not_an_error():
    # vmap's batched tensors have no storage of their own: the count leaves them out rather than fail
    # (an error inside a graded call would read as "not written yet").
    x = torch.randn(8, 256)
    after = peak_tensor_bytes(lambda t: torch.vmap(lambda row: row.softmax(-1) * 2)(t) + 1, x)
    assert after == x.numel() * 4, "what the Python code makes after the vmap is counted"


def test_median_seconds_measures_the_call_and_skips_warmup():
    calls = []

    def slow(delay):
        calls.append(delay)
        time.sleep(0.05 if len(calls) == 1 else delay)  # only the warm-up call is slow

    took = median_seconds(slow, 0.01, repeats=3, warmup=1)
    assert len(calls) == 4
    assert 0.009 <= took < 0.04


def test_median_seconds_rejects_zero_repeats():
    with pytest.raises(ValueError, match="repeats"):
        median_seconds(lambda: None, repeats=0)


def test_median_seconds_makes_exactly_the_calls_asked_for_with_gradients_off():
    seen = []

    def record(x, *, scale):
        seen.append((torch.is_grad_enabled(), scale))
        return x * scale

    x = torch.ones(3, requires_grad=True)
    for warmup, repeats in ((0, 1), (2, 3)):
        seen.clear()
        assert median_seconds(record, x, scale=2.0, repeats=repeats, warmup=warmup) > 0
        assert seen == [(False, 2.0)] * (warmup + repeats)


def test_median_seconds_is_the_median_of_the_timed_calls(monkeypatch):
    import course_utils.timing as timing

    now = [0.0]  # a clock that moves only when the timed function says so: no wall-clock time is asserted
    monkeypatch.setattr(timing, "synchronized_clock", lambda: now[0])
    durations = iter([50.0, 3.0, 1.0, 600.0])  # a warm-up call, then three timed ones

    def advance():
        now[0] += next(durations)

    assert median_seconds(advance, repeats=3, warmup=1) == 3.0, "neither the warm-up, the mean nor the fastest call"


def test_median_seconds_times_cuda_tensors_with_triton_do_bench_in_seconds(monkeypatch):
    import course_utils.timing as timing

    benched = []

    def do_bench(fn, *, return_mode):
        benched.append(return_mode)
        fn()
        return 2.5  # milliseconds

    monkeypatch.setattr(timing, "_uses_cuda", lambda fn, args, kwargs: True)
    monkeypatch.setattr(timing, "_do_bench", lambda: do_bench)
    calls = []
    assert median_seconds(lambda x: calls.append(x), 7) == pytest.approx(2.5e-3)
    assert benched == ["median"] and calls == [7]

    monkeypatch.setattr(timing, "_do_bench", lambda: None)  # no Triton: timed as on the CPU, synchronised
    calls.clear()
    assert median_seconds(lambda x: calls.append(x), 7, repeats=2) > 0 and calls == [7] * 3


def test_median_seconds_sees_a_cuda_tensor_among_arguments_or_as_the_method_owner():
    from course_utils.timing import _uses_cuda

    cpu = torch.zeros(2)
    assert not _uses_cuda(torch.mm, (cpu, cpu), {}) and not _uses_cuda(cpu.copy_, (cpu,), {})
    if torch.cuda.is_available():
        gpu = cpu.cuda()
        assert _uses_cuda(torch.mm, (cpu, gpu), {}) and _uses_cuda(gpu.copy_, (gpu,), {}) and _uses_cuda(torch.add, (), {"input": gpu})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_median_seconds_on_a_gpu_waits_for_the_kernel():
    a = torch.randn(1024, 1024, device="cuda")
    assert median_seconds(torch.mm, a, a) > 0


def test_aten_operators_shows_which_sdpa_backend_ran_and_keeps_stderr_clean(capfd):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 64, 16)
    fused = aten_operators(F.scaled_dot_product_attention, q, q, q, is_causal=True)
    with sdpa_kernel(SDPBackend.MATH):
        math = aten_operators(F.scaled_dot_product_attention, q, q, q, is_causal=True)
    assert fused[0] == math[0] == "scaled_dot_product_attention"
    assert "_scaled_dot_product_flash_attention_for_cpu" in fused and "bmm" not in fused
    assert "_scaled_dot_product_attention_math" in math and "bmm" in math
    assert capfd.readouterr().err == "", "the profiler's log lines must not reach stderr"
