#!/bin/sh
# Builds the CUDA kernel (layout.cu) into a static library with nvcc, where there is one.
#
#   native/layout/build_cuda.sh [OUT [SRC]]
#
# OUT defaults to native/layout/build/liblayout_cuda.a (what `go build -tags cuda ./pkg/layout`
# links), SRC to native/layout/layout.cu. Run it from the repository root (Bazel's genrule runs it
# from the execution root). NVCC names the compiler (default: nvcc on PATH, then
# /usr/local/cuda/bin/nvcc); NVCC_ARCH sets the GPU code built (default: V100, A100 and H100 code,
# and H100 PTX for newer GPUs, which needs CUDA 11.8 or later); NVCC_FLAGS adds flags. Without nvcc it
# says so and exits 1: nothing but the CUDA targets depends on it.
set -eu
out=${1:-native/layout/build/liblayout_cuda.a}
src=${2:-native/layout/layout.cu}
nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc=nvcc
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  fi
fi
if [ -z "$nvcc" ]; then
  echo "native/layout: nvcc not found (install the CUDA toolkit or set NVCC): the CUDA kernel is not built" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
obj="${out%.a}.o"
# shellcheck disable=SC2086
"$nvcc" -O3 -std=c++17 -x cu -Xcompiler -fPIC,-Wall -I. \
  ${NVCC_ARCH:--gencode=arch=compute_70,code=sm_70 -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90} \
  ${NVCC_FLAGS:-} -c "$src" -o "$obj"
ar rcs "$out" "$obj"
rm -f "$obj"
echo "native/layout: built $out"
