#!/usr/bin/env bash
# Build .whl/: the wheels trainkit needs on the GPU machine that its image lacks (Python 3.12,
# torch 2.11 there; no jsonargparse, omegaconf or deepspeed, and no network), for
# scripts/gpu_check.sh to install there without touching its torch.
#
#     bash scripts/gpu_wheels.sh            # writes .whl/ (ignored by git), prints its size
#
# Versions are the ones installed in .venv here (what the tests ran with); wheels are fetched
# for CPython 3.12 on manylinux x86-64 with --only-binary, except deepspeed, which PyPI ships as a
# source archive only: it is built here into a pure-Python wheel (its CUDA ops compile just in
# time there, on first use). Each package is named with its version: no dependency resolution,
# so the list below is the whole closure of what the GPU image lacks (see the device notes).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DEST=${WHEELS:-.whl}

# what the device image lacks, with everything those need that it lacks too
PACKAGES=(
    jsonargparse docstring_parser typeshed_client omegaconf  # the CLI (jsonargparse[signatures,omegaconf])
    typing_extensions                                         # a recent one, as pydantic-core needs
    deepspeed hjson pydantic pydantic_core annotated_types typing_inspection  # deepspeed_stage_*
)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64
           manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)

version_of() { "$PY" -c 'import sys; from importlib.metadata import version; print(version(sys.argv[1]))' "$1"; }

rm -rf "$DEST"
mkdir -p "$DEST"
binary=()
for name in "${PACKAGES[@]}"; do
    pinned="$name==$(version_of "$name")"
    if [ "$name" = deepspeed ]; then
        sdist=$(mktemp -d)
        "$PY" -m pip download -q --no-deps --no-binary=:all: -d "$sdist" "$pinned"
        # pure Python (no ops prebuilt: DS_BUILD_OPS=0); built against this venv's torch
        DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$DEST" "$sdist"/*
        rm -rf "$sdist"
    else
        binary+=("$pinned")
    fi
done
platform_args=()
for p in "${PLATFORMS[@]}"; do platform_args+=(--platform "$p"); done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platform_args[@]}" -d "$DEST" "${binary[@]}"

ls -1 "$DEST"
count=$(find "$DEST" -type f -name '*.whl' | wc -l)
if [ "$count" -ne "${#PACKAGES[@]}" ]; then
    echo "gpu_wheels: expected ${#PACKAGES[@]} wheels, found $count" >&2
    exit 1
fi
echo "gpu_wheels: $count wheels, $(du -sh "$DEST" | cut -f1) in $DEST"
