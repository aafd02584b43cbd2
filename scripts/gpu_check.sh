#!/usr/bin/env bash
# The GPU machine's one command (issues #51 and #52): install trainkit beside the machine's own
# torch, print the GPU, driver and torch versions, run the GPU checks
# (tests/integration/gpu/test_gpu.py, and the torch version checks against that torch:
# tests/unit/utilities/test_imports.py, tests/integration/imports/test_torch_versions.py), then
# the benchmark (scripts/bench_gpu.py).
#
#     bash scripts/gpu_wheels.sh                      # here, once: the wheels the machine lacks
#     OUT=/tmp/out bash scripts/gpu_check.sh          # there ($OUT default: gpu_check_out/)
#
# Writes under $OUT: gpu_check.log (everything printed), gpu_check.json (the machine, every
# check's outcome with the reason of each skip or failure, the benchmark's results) and the parts
# it is made of (environment.json, checks.jsonl, bench_gpu.json). Time limits in seconds, each
# can be set: CHECKS_TIMEOUT_S=190 for the checks, BENCH_TIMEOUT_S=200 for the benchmark, which
# starts no run after BENCH_BUDGET_S=150; with the installs the run stays under 7 minutes (about
# 5 expected: the checks run in 4 pytest-xdist workers).
# Without CUDA every GPU check reports itself skipped, saying why, the benchmark says its GPU
# sections skipped, and its --cpu-smoke run exercises every loop at tiny sizes instead.
# The machine's torch is never touched: the wheels go to a folder of their own on PYTHONPATH,
# trainkit is installed with --no-deps, and nothing is fetched (--no-index).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_check_out}
CHECKS_TIMEOUT_S=${CHECKS_TIMEOUT_S:-190}
BENCH_TIMEOUT_S=${BENCH_TIMEOUT_S:-200}
BENCH_BUDGET_S=${BENCH_BUDGET_S:-150}
CHECK_WORKERS=${CHECK_WORKERS:-4}
SITE=${GPU_SITE:-/tmp/trainkit_gpu_site}
STARTED=$(date +%s)
export PYTHONUNBUFFERED=1

if [ -n "${PYTHON:-}" ]; then
    PY=$PYTHON
elif [ -x .venv/bin/python ]; then
    PY=$ROOT/.venv/bin/python # a checkout with its own environment (a rehearsal here)
else
    PY=python3 # the GPU machine's, which holds its torch
fi

step() { echo; echo "== $* ($(($(date +%s) - STARTED)) s)"; }

install_wheels() {
    step "wheels for what $PY lacks"
    local missing
    missing=$("$PY" -c '
import importlib.util
names = ["jsonargparse", "omegaconf", "docstring_parser", "typeshed_client", "deepspeed", "pydantic"]
print(" ".join(n for n in names if importlib.util.find_spec(n) is None))')
    if [ -z "$missing" ]; then
        echo "none missing: .whl/ not needed"
    elif ! ls .whl/*.whl >/dev/null 2>&1; then
        echo "missing: $missing, and no .whl/ here (run scripts/gpu_wheels.sh and carry .whl)"
    elif ! "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
        echo "missing: $missing; .whl/ holds CPython 3.12 wheels, $PY is $("$PY" -V): not installed"
    else
        echo "missing: $missing; installing .whl/ into $SITE"
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" .whl/*.whl || echo "pip install of .whl/ failed (rc $?)"
        export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    fi
}

install_trainkit() {
    step "trainkit, without touching torch"
    local bin installed
    bin=$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))')
    installed=$(cd / && "$PY" -c 'import pathlib, trainkit; print(pathlib.Path(trainkit.__file__).parent)' 2>/dev/null)
    if [ "$installed" = "$ROOT/trainkit" ] && [ -x "$bin/trainkit" ]; then
        echo "already installed from this checkout ($bin/trainkit)"
    elif "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e .; then
        echo "installed: pip install --no-deps -e . ($bin/trainkit)"
    else
        echo "pip install -e . failed: trainkit from PYTHONPATH (no console script)"
        export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
    fi
}

describe_machine() {
    step "machine"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv 2>&1
    else
        echo "nvidia-smi: not on PATH (no NVIDIA driver here)"
    fi
    "$PY" - "$OUT/environment.json" <<'EOF'
import importlib.metadata as metadata
import json, os, platform, subprocess, sys
import torch

def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None

def driver():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split()
        return out[0] if out else None
    except (OSError, subprocess.TimeoutExpired):
        return None

cuda = torch.cuda.is_available()
info = {
    "python": platform.python_version(), "executable": sys.executable,
    "torch": torch.__version__, "torch_cuda": torch.version.cuda,
    "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
    "driver": driver(), "cuda_available": cuda,
    "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
    "capability": ".".join(map(str, torch.cuda.get_device_capability(0))) if cuda else None,
    "cpus": os.cpu_count(),
    **{name: version(name) for name in ("trainkit", "lightning", "jsonargparse", "omegaconf",
                                        "deepspeed", "torchmetrics", "pytest", "pytest-xdist")},
}
json.dump(info, open(sys.argv[1], "w"), indent=1)
print(json.dumps(info, indent=1))
EOF
}

run_checks() { # sets pytest_rc
    step "GPU checks: tests/integration/gpu/test_gpu.py and the torch version checks (limit ${CHECKS_TIMEOUT_S} s)"
    local workers=(-n "$CHECK_WORKERS" --dist worksteal)
    [ "$cuda" = 1 ] || workers=(-n 0) # only the CPU tests run: no workers to start
    GPU_RESULTS_LINES=$OUT/checks.jsonl PYTHONPATH=$ROOT/scripts${PYTHONPATH:+:$PYTHONPATH} \
        timeout -k 10 "$CHECKS_TIMEOUT_S" "$PY" -m pytest tests/integration/gpu/test_gpu.py \
        tests/unit/utilities/test_imports.py tests/integration/imports/test_torch_versions.py \
        -p gpu_results -o addopts="" "${workers[@]}" \
        -p no:cacheprovider -q -rsfE -o timeout=150
    pytest_rc=$?
    [ "$pytest_rc" = 124 ] && echo "the checks ran past ${CHECKS_TIMEOUT_S} s and were stopped"
}

run_bench() { # sets bench_rc
    if [ "$cuda" = 1 ]; then
        step "benchmark: scripts/bench_gpu.py (limit ${BENCH_TIMEOUT_S} s)"
        timeout -k 10 "$BENCH_TIMEOUT_S" "$PY" scripts/bench_gpu.py --json "$OUT/bench_gpu.json" \
            --budget-s "$BENCH_BUDGET_S"
        bench_rc=$?
    else
        step "benchmark: no CUDA device, so its GPU sections skip; --cpu-smoke runs every loop"
        "$PY" scripts/bench_gpu.py --json "$OUT/bench_gpu.json"
        timeout -k 10 "$BENCH_TIMEOUT_S" "$PY" scripts/bench_gpu.py --cpu-smoke \
            --json "$OUT/bench_cpu_smoke.json"
        bench_rc=$?
    fi
    [ "$bench_rc" = 124 ] && echo "the benchmark ran past ${BENCH_TIMEOUT_S} s and was stopped"
}

main() {
    install_wheels
    install_trainkit
    describe_machine
    cuda=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))')
    run_checks
    run_bench
    step "summary"
    "$PY" scripts/gpu_results.py summarize --lines "$OUT/checks.jsonl" \
        --env "$OUT/environment.json" --bench "$OUT/bench_gpu.json" \
        --smoke "$OUT/bench_cpu_smoke.json" --out "$OUT/gpu_check.json" \
        --pytest-rc "$pytest_rc" --bench-rc "$bench_rc" --seconds "$(($(date +%s) - STARTED))"
    echo "gpu_check: done in $(($(date +%s) - STARTED)) s; $OUT/gpu_check.json"
    if [ "$pytest_rc" != 0 ]; then return "$pytest_rc"; fi
    return "$bench_rc"
}

mkdir -p "$OUT"
rm -f "$OUT"/{gpu_check.log,gpu_check.json,checks.jsonl,environment.json,bench_gpu.json,bench_cpu_smoke.json}
main 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
