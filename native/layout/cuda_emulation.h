// Just enough of the CUDA runtime to compile layout.cu as plain C++ and run its kernels on the CPU,
// one emulated thread after another (FEL_CUDA_EMULATION). It checks the kernels' logic (indexing,
// pooling, the launch geometry) where there is no GPU; it says nothing about nvcc or the hardware.
// The kernels use no shared memory, barriers or warp intrinsics, so sequential emulation is exact;
// atomicAdd becomes a plain add.
#ifndef MONOLITH_NATIVE_LAYOUT_CUDA_EMULATION_H_
#define MONOLITH_NATIVE_LAYOUT_CUDA_EMULATION_H_

#include <stdlib.h>
#include <string.h>

#include <chrono>

#define __global__
#define __device__
#define __host__
#define __restrict__ __restrict

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// Per host thread, so that concurrent emulated launches do not interfere.
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorNoDevice = 100 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };

// One emulated device.
inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}
// The errors the emulation can return, with the runtime's names and descriptions.
struct EmulatedCudaError {
  cudaError_t code;
  const char *name, *text;
};
inline const EmulatedCudaError &FindEmulatedCudaError(cudaError_t rc) {
  static const EmulatedCudaError known[] = {
      {cudaSuccess, "cudaSuccess", "no error"},
      {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
      {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
  };
  static const EmulatedCudaError unknown{-1, "cudaErrorUnknown", "unknown error"};
  for (const EmulatedCudaError &e : known) {
    if (e.code == rc) return e;
  }
  return unknown;
}
inline const char *cudaGetErrorName(cudaError_t rc) { return FindEmulatedCudaError(rc).name; }
inline const char *cudaGetErrorString(cudaError_t rc) { return FindEmulatedCudaError(rc).text; }

// Events are host clock readings: emulated launches run to completion before they return.
typedef std::chrono::steady_clock::time_point *cudaEvent_t;
inline cudaError_t cudaEventCreate(cudaEvent_t *e) {
  *e = new std::chrono::steady_clock::time_point();
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e) {
  *e = std::chrono::steady_clock::now();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop) {
  *ms = std::chrono::duration<float, std::milli>(*stop - *start).count();
  return cudaSuccess;
}

inline cudaError_t cudaMalloc(void **p, size_t n) {
  *p = malloc(n ? n : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void *p) {
  free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
  if (n) memcpy(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void *p, int v, size_t n) {
  if (n) memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

inline float atomicAdd(float *a, float v) {
  float old = *a;
  *a = old + v;
  return old;
}

// FEL_LAUNCH(kernel, grid, block, args...) is kernel<<<grid, block>>>(args...).
#define FEL_LAUNCH(kernel, grid, block, ...)                                          \
  do {                                                                                \
    gridDim = (grid);                                                                 \
    blockDim = (block);                                                               \
    for (blockIdx.y = 0; blockIdx.y < gridDim.y; ++blockIdx.y)                        \
      for (blockIdx.x = 0; blockIdx.x < gridDim.x; ++blockIdx.x)                      \
        for (threadIdx.y = 0; threadIdx.y < blockDim.y; ++threadIdx.y)                \
          for (threadIdx.x = 0; threadIdx.x < blockDim.x; ++threadIdx.x) kernel(__VA_ARGS__); \
  } while (0)

#endif  // MONOLITH_NATIVE_LAYOUT_CUDA_EMULATION_H_
