"""local_cuda: what CUDA this machine has, for the CUDA targets of //native/layout and //pkg/layout.

It writes @local_cuda//:defs.bzl with
  NVCC           the nvcc to build with ("" when there is none: the CUDA targets are incompatible,
                 and `bazel test //...` lists them as SKIPPED);
  CUDA_GPU       whether the NVIDIA driver has a GPU (/proc/driver/nvidia/gpus, /dev/nvidiaN), so
                 that the CUDA tests can run; without one they are SKIPPED too, but the kernel is
                 still compiled and linked (layout_cuda_build_test);
  CUDA_LINKOPTS  how to link the CUDA runtime.
NVCC in the environment names the compiler (NVCC=none: build as if there were none); otherwise nvcc
on PATH, then /usr/local/cuda/bin/nvcc. Nothing is downloaded.
"""

def _has_gpu(rctx):
    # The driver lists its GPUs under /proc/driver/nvidia/gpus and has a /dev/nvidiaN node per GPU.
    # (/dev/nvidiactl alone proves nothing: the CUDA library creates it even without a GPU.)
    gpus = rctx.path("/proc/driver/nvidia/gpus")
    if gpus.exists and len(gpus.readdir()) > 0:
        return True
    for i in range(16):
        if rctx.path("/dev/nvidia%d" % i).exists:
            return True
    return False

def _local_cuda_impl(rctx):
    nvcc = rctx.os.environ.get("NVCC", "")
    if nvcc == "none":
        nvcc = ""
    elif nvcc == "":
        found = rctx.which("nvcc")
        if found:
            nvcc = str(found)
        elif rctx.path("/usr/local/cuda/bin/nvcc").exists:
            nvcc = "/usr/local/cuda/bin/nvcc"
    gpu = nvcc != "" and _has_gpu(rctx)
    linkopts = []
    if nvcc:
        # The runtime next to nvcc (an NVIDIA install), else the system's (Debian's packages).
        root = str(rctx.path(nvcc).dirname.dirname)
        linkopts = ["-L%s/lib64" % root, "-L/usr/local/cuda/lib64", "-lcudart"]
    rctx.file("BUILD.bazel", 'exports_files(["defs.bzl"])\n')
    rctx.file("defs.bzl", "\n".join([
        "# Written by tools/bazel/cuda.bzl (local_cuda) for this machine.",
        "NVCC = %r" % nvcc,
        "CUDA_GPU = %r" % gpu,
        "CUDA_LINKOPTS = %r" % linkopts,
        "",
    ]))

local_cuda = repository_rule(
    implementation = _local_cuda_impl,
    environ = ["NVCC", "PATH"],
    local = True,
)
