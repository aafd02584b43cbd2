#!/usr/bin/env bash
# Build and install horovod 0.28.1 (its last release) into a venv, for `strategy: horovod` with
# horovod's own allreduce (docs/clusters.md, "Horovod"). Usage: scripts/install_horovod.sh [PYTHON]
#
# Its CMake files ask for C++14, and torch 2.13's headers need C++17: as released it does not
# compile ("#error C++17 or later compatible compiler is required to use PyTorch"). Raising the
# standard in its two CMakeLists.txt is the whole change. CPU build with gloo and (where OpenMPI's
# headers are) MPI; about 2.5 minutes on 2 cores; the wheel is kept in .cache/horovod for next time.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-.venv/bin/python}
version=0.28.1

if "$python" -c "import horovod.torch" 2>/dev/null; then
    echo "horovod: already importable by $python"
    exit 0
fi
torch_version=$("$python" -c "import torch; print(torch.__version__)")
cache=.cache/horovod/torch-$torch_version
mkdir -p "$cache"
wheel=$(ls "$cache"/horovod-"$version"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 &&
        ! { command -v cmake && command -v g++ && command -v mpicxx; } >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ libopenmpi-dev >/dev/null
    fi
    for tool in cmake g++; do
        command -v "$tool" >/dev/null || { echo "horovod: needs $tool (apt-get install $tool)" >&2; exit 2; }
    done
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    "$python" -m pip download -q --no-deps --no-binary :all: "horovod==$version" -d "$src"
    tar -xzf "$src/horovod-$version.tar.gz" -C "$src"
    tree="$src/horovod-$version"
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
        "$tree/CMakeLists.txt" "$tree/horovod/torch/CMakeLists.txt"
    grep -q "CMAKE_CXX_STANDARD 17" "$tree/horovod/torch/CMakeLists.txt"
    mpi=$(command -v mpicxx >/dev/null && echo 1 || echo 0)
    echo "horovod: building $version for torch $torch_version (gloo$([ "$mpi" = 1 ] && echo ' + MPI'); minutes)"
    env HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
        HOROVOD_WITH_GLOO=1 "HOROVOD_WITH$([ "$mpi" = 1 ] || echo OUT)_MPI=1" \
        MAKEFLAGS="-j$(nproc)" \
        "$python" -m pip wheel -q --no-deps --no-build-isolation -w "$cache" "$tree"
    wheel=$(ls "$cache"/horovod-"$version"-*.whl | head -n 1)
fi
"$python" -m pip install -q "$wheel"
"$python" -c "import horovod, horovod.torch as hvd; print(f'horovod {horovod.__version__}: \
installed (gloo: {hvd.gloo_built()}, MPI: {hvd.mpi_built()})')"
