// For the Go toolchain, which compiles this file as C++ into pkg/layout through a symlink only for
// `go test -tags cudaemu` (emulated CUDA, see cuda_emulation.h).
//go:build cudaemu && !cuda && !cudacdeps

// CUDA kernel of the fused embedding-to-layout op (see layout.h for the contract).
//
// Built only where a CUDA toolchain exists (build_cuda.sh; Bazel finds nvcc itself, see
// tools/bazel/cuda.bzl). Compiled with nvcc 11.8 (Debian's nvidia-cuda-toolkit) for sm_70, sm_80
// and sm_90, and linked; not yet run on a GPU. With -DFEL_CUDA_EMULATION it compiles as plain C++
// and runs its kernels on the CPU (cuda_emulation.h), which is how layout_cuda_emu_test checks its
// logic against the CPU kernel.
//
// Inputs are validated on the host with the CPU kernel's checks (fel::Prepare) before anything is
// copied, so the kernels index only validated offsets. Forward: one warp per (group, batch row),
// lanes over columns; a group is one slice, or all slices of an ADDN layout (they share one region
// and are added in plan order), so every output float is written by one thread, in the CPU
// kernel's order of operations: the results equal fel_forward's. Backward: one warp per (slice,
// batch row), atomicAdd into the embedding gradients; the order of the adds varies, so sums may
// round differently from fel_backward.
#ifdef FEL_CUDA_EMULATION
#include "native/layout/cuda_emulation.h"
#else
#include <cuda_runtime.h>
#define FEL_LAUNCH(kernel, grid, block, ...) kernel<<<(grid), (block)>>>(__VA_ARGS__)
#endif

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <new>
#include <vector>

#include "native/layout/layout.h"
#include "native/layout/layout_internal.h"

namespace fel {
namespace cuda {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

struct DevPart {
  int64_t base;    // first float of the part in the concatenated embeddings
  int64_t stride;  // floats per position
};

struct DevFeature {
  int64_t first;
  int32_t present;
  int32_t shared;
};

struct Group {
  int32_t first_slice;
  int32_t num_slices;
};

// Args are the device pointers every kernel reads.
struct Args {
  const fel_slice *slices;
  const int64_t *row_size;   // per output
  const int64_t *out_base;   // per output: first float in the concatenated outputs
  const DevPart *parts;
  const DevFeature *features;
  const uint64_t *fid_offset;
  const int32_t *feature_offset;
  int64_t num_fids;
  int64_t num_feature_rows;
  int64_t batch;
};

__device__ inline void FidRangeDev(const Args &a, const DevFeature &fr, int64_t r, int64_t *b,
                                   int64_t *e) {
  *b = *e = 0;
  if (!fr.present) return;
  const int64_t row = fr.first + (fr.shared ? 0 : r);
  *b = a.feature_offset[row];
  *e = row + 1 < a.num_feature_rows ? a.feature_offset[row + 1] : a.num_fids;
}

// Column col of the embedding row of fid k, for a slice starting at column start.
__device__ inline int64_t EmbIndex(const Args &a, int64_t k, int32_t start) {
  const uint64_t fo = a.fid_offset[k];
  const DevPart pt = a.parts[fo >> 32];
  return pt.base + static_cast<int64_t>(fo & 0xffffffffu) * pt.stride + start;
}

__device__ inline float Term(const Args &a, const float *emb, const fel_slice &sl, int64_t k,
                             int32_t col, float count) {
  const float v = emb[EmbIndex(a, k, sl.start) + col];
  return sl.pooling == FEL_MEAN ? v / count : v;
}

__global__ void ForwardKernel(Args a, const Group *groups, int32_t num_groups, const float *emb,
                              float *out) {
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (warp >= static_cast<int64_t>(num_groups) * a.batch) return;
  const Group grp = groups[warp / a.batch];
  const int64_t r = warp % a.batch;
  for (int32_t s = grp.first_slice; s < grp.first_slice + grp.num_slices; ++s) {
    const fel_slice sl = a.slices[s];
    const DevFeature fr = a.features[sl.feature];
    float *dst = out + a.out_base[sl.output] + r * a.row_size[sl.output] + sl.offset;
    int64_t b, e;
    FidRangeDev(a, fr, r, &b, &e);
    const float count = static_cast<float>(e - b);
    for (int32_t c = threadIdx.x; c < sl.dims; c += blockDim.x) {
      if (sl.pooling == FEL_FIRSTN) {
        for (int64_t k = 0; k < sl.max_seq; ++k) {
          dst[k * sl.seq_stride + c] = k < e - b ? emb[EmbIndex(a, b + k, sl.start) + c] : 0.0f;
        }
      } else if (!sl.addn || (fr.present && fr.shared)) {
        // Pooled: the first term, then the others added (the CPU kernel's PoolOne); assigned, except
        // that a shared feature in an ADDN layout is added after its layout's first slice.
        float v = 0.0f;
        for (int64_t k = b; k < e; ++k) v = k == b ? Term(a, emb, sl, k, c, count) : v + Term(a, emb, sl, k, c, count);
        dst[c] = !sl.addn || sl.addn_first ? v : dst[c] + v;
      } else {
        // ADDN: every term added to the region, which the layout's first slice clears.
        float v = sl.addn_first ? 0.0f : dst[c];
        for (int64_t k = b; k < e; ++k) v += Term(a, emb, sl, k, c, count);
        dst[c] = v;
      }
    }
  }
}

__global__ void BackwardKernel(Args a, int32_t num_slices, const float *grads, float *emb_grads) {
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (warp >= static_cast<int64_t>(num_slices) * a.batch) return;
  const fel_slice sl = a.slices[warp / a.batch];
  const int64_t r = warp % a.batch;
  const DevFeature fr = a.features[sl.feature];
  int64_t b, e;
  FidRangeDev(a, fr, r, &b, &e);
  const float count = static_cast<float>(e - b);
  if (sl.pooling == FEL_FIRSTN && e > b + sl.max_seq) e = b + sl.max_seq;
  const float *g = grads + a.out_base[sl.output] + r * a.row_size[sl.output] + sl.offset;
  for (int32_t c = threadIdx.x; c < sl.dims; c += blockDim.x) {
    for (int64_t k = b; k < e; ++k) {
      float v = g[c];
      if (sl.pooling == FEL_FIRSTN) {
        v = g[(k - b) * sl.seq_stride + c];
      } else if (sl.pooling == FEL_MEAN) {
        v = v / count;
      }
      atomicAdd(emb_grads + EmbIndex(a, k, sl.start) + c, v);
    }
  }
}

int32_t CudaFail(cudaError_t rc, int32_t step, fel_error *err) {
  *err = fel_error{FEL_ERR_CUDA, rc, step, 0};
  return FEL_ERR_CUDA;
}

// Device owns the device buffers of one call.
class Device {
 public:
  ~Device() {
    for (void *p : ptrs_) cudaFree(p);
  }
  template <typename T>
  T *Alloc(size_t n, int step) {
    if (rc_ != cudaSuccess) return nullptr;
    void *p = nullptr;
    rc_ = cudaMalloc(&p, n * sizeof(T) + 1);
    if (rc_ != cudaSuccess) {
      step_ = step;
      return nullptr;
    }
    ptrs_.push_back(p);
    return static_cast<T *>(p);
  }
  template <typename T>
  T *Copy(const T *host, size_t n, int step) {
    T *d = Alloc<T>(n, step);
    if (d && n) Check(cudaMemcpy(d, host, n * sizeof(T), cudaMemcpyHostToDevice), step);
    return d;
  }
  void Check(cudaError_t rc, int step) {
    if (rc_ == cudaSuccess && rc != cudaSuccess) {
      rc_ = rc;
      step_ = step;
    }
  }
  bool ok() const { return rc_ == cudaSuccess; }
  int32_t Fail(fel_error *err) const { return CudaFail(rc_, step_, err); }

 private:
  std::vector<void *> ptrs_;
  cudaError_t rc_ = cudaSuccess;
  int step_ = 0;
};

// Staged is the host side of Args, and the device copies.
struct Staged {
  std::vector<int64_t> emb_base, out_base;
  int64_t emb_total = 0, out_total = 0;
  Args args{};
};

void Stage(const fel_plan *plan, const fel_input *in, const Prepared &p, const int64_t *out_sizes,
           Device *dev, Staged *st) {
  for (int32_t i = 0; i < in->num_embeddings; ++i) {
    st->emb_base.push_back(st->emb_total);
    st->emb_total += in->embedding_sizes[i];
  }
  for (int32_t i = 0; i < plan->num_outputs; ++i) {
    st->out_base.push_back(st->out_total);
    st->out_total += out_sizes[i];
  }
  std::vector<DevPart> parts;
  for (const Part &pt : p.parts) parts.push_back(DevPart{st->emb_base[pt.emb] + pt.offset, pt.stride});
  std::vector<DevFeature> features;
  for (const FeatureRows &fr : p.features) features.push_back(DevFeature{fr.first, fr.present, fr.shared});
  Args &a = st->args;
  a.slices = dev->Copy(plan->slices, plan->num_slices, FEL_CUDA_STEP_TABLES);
  a.row_size = dev->Copy(plan->output_row_size, plan->num_outputs, FEL_CUDA_STEP_TABLES);
  a.out_base = dev->Copy(st->out_base.data(), st->out_base.size(), FEL_CUDA_STEP_TABLES);
  a.parts = dev->Copy(parts.data(), parts.size(), FEL_CUDA_STEP_TABLES);
  a.features = dev->Copy(features.data(), features.size(), FEL_CUDA_STEP_TABLES);
  a.fid_offset = dev->Copy(in->fid_offset, in->num_fids, FEL_CUDA_STEP_TABLES);
  a.feature_offset = dev->Copy(in->feature_offset, in->num_feature_rows, FEL_CUDA_STEP_TABLES);
  a.num_fids = in->num_fids;
  a.num_feature_rows = in->num_feature_rows;
  a.batch = in->batch_size;
}

// CheckDevice fails unless there is a device to run on (fel_cuda_devices): without one, every later
// call would fail with a less telling error.
int32_t CheckDevice(fel_error *err) {
  int32_t count = 0;
  return fel_cuda_devices(&count, err);
}

// Grid sizes the launch of one warp per (unit, batch row): units are groups (forward) or slices
// (backward). Too many rows for one grid is FEL_ERR_RESOURCE with a = 1.
int32_t Grid(int64_t units, int64_t batch, int64_t *warps, dim3 *grid, fel_error *err) {
  if (units > 0 && batch > INT64_MAX / units) {
    *err = fel_error{FEL_ERR_RESOURCE, 1, batch, 0};
    return err->code;
  }
  *warps = units * batch;
  const int64_t blocks = (*warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffff) {
    *err = fel_error{FEL_ERR_RESOURCE, 1, *warps, 0};
    return err->code;
  }
  *grid = dim3(static_cast<unsigned>(blocks > 0 ? blocks : 1));
  return FEL_OK;
}

// ForwardRun is a forward pass on the device: Setup validates the inputs and copies them over,
// Launch runs the kernel (asynchronously).
struct ForwardRun {
  Device dev;
  Staged st;
  std::vector<Group> groups;
  const Group *d_groups = nullptr;
  float *d_emb = nullptr;
  float *d_out = nullptr;
  dim3 grid;
  int64_t warps = 0;

  // Setup checks outputs (host pointers) too unless they are null (fel_forward_cuda_bench).
  int32_t Setup(const fel_plan *plan, const fel_input *in, float *const *outputs,
                const int64_t *output_sizes, int32_t num_outputs, fel_error *err) {
    fel::Prepared p;
    if (fel::Prepare(plan, in, &p, err)) return err->code;
    for (int32_t i = 0; i < in->num_embeddings; ++i) {
      if (in->embedding_sizes[i] > 0 && (!in->embeddings || !in->embeddings[i])) {
        *err = fel_error{FEL_ERR_INPUT, FEL_INPUT_EMBEDDINGS, i, 0};
        return err->code;
      }
    }
    if (fel::CheckTensors(plan, in->batch_size, reinterpret_cast<const void *const *>(outputs),
                          output_sizes, num_outputs, err, /*need_ptrs=*/outputs != nullptr)) {
      return err->code;
    }
    for (int32_t s = 0; s < plan->num_slices; ++s) {
      const fel_slice &sl = plan->slices[s];
      if (sl.addn && !sl.addn_first && !groups.empty()) {
        ++groups.back().num_slices;
      } else {
        groups.push_back(Group{s, 1});
      }
    }
    if (Grid(static_cast<int64_t>(groups.size()), in->batch_size, &warps, &grid, err)) return err->code;
    if (warps == 0) return FEL_OK;
    if (CheckDevice(err)) return err->code;
    Stage(plan, in, p, output_sizes, &dev, &st);
    d_groups = dev.Copy(groups.data(), groups.size(), FEL_CUDA_STEP_TABLES);
    d_emb = dev.Alloc<float>(st.emb_total, FEL_CUDA_STEP_INPUT);
    for (int32_t i = 0; d_emb && i < in->num_embeddings; ++i) {
      if (in->embedding_sizes[i] == 0) continue;
      dev.Check(cudaMemcpy(d_emb + st.emb_base[i], in->embeddings[i], in->embedding_sizes[i] * sizeof(float),
                           cudaMemcpyHostToDevice), FEL_CUDA_STEP_INPUT);
    }
    d_out = dev.Alloc<float>(st.out_total, FEL_CUDA_STEP_RESULT);
    if (!dev.ok()) return dev.Fail(err);
    return FEL_OK;
  }

  void Launch() {
    FEL_LAUNCH(ForwardKernel, grid, dim3(kWarp, kWarpsPerBlock), st.args, d_groups,
               static_cast<int32_t>(groups.size()), d_emb, d_out);
    dev.Check(cudaGetLastError(), FEL_CUDA_STEP_LAUNCH);
  }
};

// Events times work on the device between two CUDA events (fel_forward_cuda_bench).
class Events {
 public:
  explicit Events(Device *dev) : dev_(dev) {
    dev_->Check(cudaEventCreate(&start_), FEL_CUDA_STEP_TIMING);
    dev_->Check(cudaEventCreate(&stop_), FEL_CUDA_STEP_TIMING);
  }
  ~Events() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // Time runs fn, which queues work on the device, and returns the milliseconds the work took.
  template <typename Fn>
  double Time(Fn fn) {
    float ms = 0;
    dev_->Check(cudaEventRecord(start_), FEL_CUDA_STEP_TIMING);
    fn();
    dev_->Check(cudaEventRecord(stop_), FEL_CUDA_STEP_TIMING);
    dev_->Check(cudaEventSynchronize(stop_), FEL_CUDA_STEP_RUN);
    dev_->Check(cudaEventElapsedTime(&ms, start_, stop_), FEL_CUDA_STEP_TIMING);
    return ms;
  }

 private:
  Device *dev_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace cuda
}  // namespace fel

extern "C" {

int32_t fel_forward_cuda(const fel_plan *plan, const fel_input *in, float *const *outputs,
                         const int64_t *output_sizes, int32_t num_outputs, fel_error *err) {
  using namespace fel::cuda;
  try {
    ForwardRun run;
    if (run.Setup(plan, in, outputs, output_sizes, num_outputs, err)) return err->code;
    if (run.warps == 0) return FEL_OK;
    Device &dev = run.dev;
    run.Launch();
    dev.Check(cudaDeviceSynchronize(), FEL_CUDA_STEP_RUN);
    for (int32_t i = 0; dev.ok() && i < num_outputs; ++i) {
      if (output_sizes[i] == 0) continue;
      dev.Check(cudaMemcpy(outputs[i], run.d_out + run.st.out_base[i], output_sizes[i] * sizeof(float),
                           cudaMemcpyDeviceToHost), FEL_CUDA_STEP_COPY_BACK);
    }
    if (!dev.ok()) return dev.Fail(err);
    return FEL_OK;
  } catch (const std::bad_alloc &) {
    *err = fel_error{FEL_ERR_RESOURCE, 0, 0, 0};
    return err->code;
  }
}

int32_t fel_forward_cuda_bench(const fel_plan *plan, const fel_input *in,
                               const int64_t *output_sizes, int32_t num_outputs, int32_t iters,
                               int64_t copy_bytes, double *kernel_ms, double *copy_ms,
                               fel_error *err) {
  using namespace fel::cuda;
  try {
    *kernel_ms = *copy_ms = 0;
    if (iters < 1 || copy_bytes < 0) {
      *err = fel_error{FEL_ERR_INPUT, FEL_INPUT_BENCH, iters, copy_bytes};
      return err->code;
    }
    ForwardRun run;
    // Nothing is copied back: the outputs' sizes are checked, there are no host buffers.
    if (run.Setup(plan, in, nullptr, output_sizes, num_outputs, err)) return err->code;
    Device &dev = run.dev;
    char *d_src = dev.Alloc<char>(copy_bytes, FEL_CUDA_STEP_TIMING);
    char *d_dst = dev.Alloc<char>(copy_bytes, FEL_CUDA_STEP_TIMING);
    if (d_src) dev.Check(cudaMemset(d_src, 1, copy_bytes), FEL_CUDA_STEP_TIMING);
    Events ev(&dev);
    if (!dev.ok()) return dev.Fail(err);
    // One run first: the first launch pays for loading the module.
    if (run.warps > 0) run.Launch();
    dev.Check(cudaDeviceSynchronize(), FEL_CUDA_STEP_RUN);
    *kernel_ms = ev.Time([&] {
      for (int32_t i = 0; i < iters && run.warps > 0; ++i) run.Launch();
    }) / iters;
    *copy_ms = ev.Time([&] {
      for (int32_t i = 0; i < iters; ++i) {
        dev.Check(cudaMemcpy(d_dst, d_src, copy_bytes, cudaMemcpyDeviceToDevice), FEL_CUDA_STEP_TIMING);
      }
    }) / iters;
    if (!dev.ok()) return dev.Fail(err);
    return FEL_OK;
  } catch (const std::bad_alloc &) {
    *err = fel_error{FEL_ERR_RESOURCE, 0, 0, 0};
    return err->code;
  }
}

int32_t fel_cuda_devices(int32_t *count, fel_error *err) {
  *count = 0;
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) return fel::cuda::CudaFail(rc, FEL_CUDA_STEP_DEVICE, err);
  if (n == 0) return fel::cuda::CudaFail(cudaErrorNoDevice, FEL_CUDA_STEP_DEVICE, err);
  *count = n;
  return FEL_OK;
}

void fel_cuda_error_string(int32_t code, char *buf, int32_t n) {
  if (n <= 0) return;
  const cudaError_t rc = static_cast<cudaError_t>(code);
  snprintf(buf, static_cast<size_t>(n), "%s: %s", cudaGetErrorName(rc), cudaGetErrorString(rc));
}

int32_t fel_backward_cuda(const fel_plan *plan, const fel_input *in, const float *const *grads,
                          const int64_t *grad_sizes, int32_t num_grads, float *const *emb_grads,
                          fel_error *err) {
  using namespace fel::cuda;
  try {
    fel::Prepared p;
    if (fel::Prepare(plan, in, &p, err)) return err->code;
    if (fel::CheckTensors(plan, in->batch_size, reinterpret_cast<const void *const *>(grads),
                          grad_sizes, num_grads, err)) {
      return err->code;
    }
    for (int32_t i = 0; i < in->num_embeddings; ++i) {
      if (in->embedding_sizes[i] > 0 && (!emb_grads || !emb_grads[i])) {
        *err = fel_error{FEL_ERR_INPUT, FEL_INPUT_EMBEDDINGS, i, 0};
        return err->code;
      }
    }
    dim3 grid;
    int64_t warps = 0;
    if (Grid(plan->num_slices, in->batch_size, &warps, &grid, err)) return err->code;

    if (warps == 0) {  // no contributions: zeros, without a device
      for (int32_t i = 0; i < in->num_embeddings; ++i) {
        if (in->embedding_sizes[i] > 0) memset(emb_grads[i], 0, in->embedding_sizes[i] * sizeof(float));
      }
      return FEL_OK;
    }
    if (CheckDevice(err)) return err->code;
    Device dev;
    Staged st;
    Stage(plan, in, p, grad_sizes, &dev, &st);
    float *d_grads = dev.Alloc<float>(st.out_total, FEL_CUDA_STEP_INPUT);
    for (int32_t i = 0; d_grads && i < num_grads; ++i) {
      if (grad_sizes[i] == 0) continue;
      dev.Check(cudaMemcpy(d_grads + st.out_base[i], grads[i], grad_sizes[i] * sizeof(float),
                           cudaMemcpyHostToDevice), FEL_CUDA_STEP_INPUT);
    }
    float *d_emb = dev.Alloc<float>(st.emb_total, FEL_CUDA_STEP_RESULT);
    if (d_emb) dev.Check(cudaMemset(d_emb, 0, st.emb_total * sizeof(float)), FEL_CUDA_STEP_RESULT);
    if (!dev.ok()) return dev.Fail(err);
    FEL_LAUNCH(BackwardKernel, grid, dim3(kWarp, kWarpsPerBlock), st.args, plan->num_slices, d_grads, d_emb);
    dev.Check(cudaGetLastError(), FEL_CUDA_STEP_LAUNCH);
    dev.Check(cudaDeviceSynchronize(), FEL_CUDA_STEP_RUN);
    for (int32_t i = 0; dev.ok() && i < in->num_embeddings; ++i) {
      if (in->embedding_sizes[i] == 0) continue;
      dev.Check(cudaMemcpy(emb_grads[i], d_emb + st.emb_base[i], in->embedding_sizes[i] * sizeof(float),
                           cudaMemcpyDeviceToHost), FEL_CUDA_STEP_COPY_BACK);
    }
    if (!dev.ok()) return dev.Fail(err);
    return FEL_OK;
  } catch (const std::bad_alloc &) {
    *err = fel_error{FEL_ERR_RESOURCE, 0, 0, 0};
    return err->code;
  }
}

}  // extern "C"
