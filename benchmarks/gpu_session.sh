#!/usr/bin/env bash
# Every GPU test and benchmark of the course, for one lent GPU machine, in under 10 minutes:
#
#     bash benchmarks/gpu_session.sh [OUT_DIR]
#
# It writes OUT_DIR/device.txt (the GPU, its driver, torch and Triton, the date and the commit), OUT_DIR/gpu_tests.txt
# (the kernels' tests run natively) and OUT_DIR/fused_attention_<gpu>.json (forward, then forward + backward, for
# notebook 07's simple and fast forward with notebook 08's plain and fast backward, against SDPA's flash and cuDNN
# backends; each dtype and head dim's rows as soon as they are measured). OUT_DIR is $OUT where set (the device machine's), else
# benchmarks/results. Without a CUDA GPU it says so and runs nothing: the kernels' GPU builds are checked
# on the CPU by tests/test_kernels.py instead.
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
out="${1:-${OUT:-benchmarks/results}}"

if ! "$python" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "no CUDA GPU here: nothing to run"
    exit 0
fi
mkdir -p "$out"
"$python" -c "
import torch, triton
p = torch.cuda.get_device_properties(0)
print(f'{p.name}, sm_{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB; torch {torch.__version__}, Triton {triton.__version__}')
" | tee "$out/device.txt"
nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | sed 's/^/driver /' | tee -a "$out/device.txt"
echo "measured $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee -a "$out/device.txt"
gpu="$("$python" -c "import torch; print(torch.cuda.get_device_name(0).split()[1].lower())")"

status=0
# The native tests (about 2 minutes on an H100 before 08's fast backward): the kernels against SDPA, the fast
# kernels, the launcher's GPU path. Not the ahead-of-time compiles (marked slow): they need no GPU, and CI runs them.
timeout 210 "$python" -m pytest -q -n0 -p no:cacheprovider -m "not slow" tests/test_kernels.py 2>&1 | tee "$out/gpu_tests.txt" | tail -15 || status=1
# The sweep, cut to fit: three lengths, both head dims, causal and not; bfloat16 first, whose d = 64 group holds the
# issue's configuration (B = 1, H = 16, T = 16384, causal). The JSON is rewritten after every shape ("complete": false
# until the end), so a sweep cut short by the timeout keeps what it measured.
timeout 370 "$python" benchmarks/fused_attention.py --dtype bfloat16 float16 --lengths 1024 4096 16384 \
    --methods flash cudnn triton fast --json "$out/fused_attention_${gpu}.json" 2>&1 | tail -80 || status=1
exit "$status"
