// The CUDA kernel against the CPU kernel: forward bit for bit, backward within float tolerance
// (atomic adds in any order), the same error for every corrupt input. Runs on a GPU
// (layout_cuda_test, --define cuda=1) or emulated on the CPU (layout_cuda_emu_test).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <random>
#include <vector>

#include "native/layout/layout.h"
#include "native/layout/layout_test_fixture.h"

namespace {

using fel_test::Corrupt;
using fel_test::Fixture;
using fel_test::Outputs;

int failures = 0;

#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

bool SameError(const fel_error &a, const fel_error &b) {
  return a.code == b.code && a.a == b.a && a.b == b.b && a.c == b.c;
}

// Compare runs both kernels on f: the same error, or bit-identical outputs and close gradients.
// Returns whether f was accepted.
bool Compare(Fixture &f) {
  Outputs cpu(f), gpu(f);
  fel_error ec{}, eg{};
  int32_t rc = fel_forward(&f.plan, &f.in, cpu.ptrs.data(), cpu.sizes.data(), 3, 2, &ec);
  int32_t rg = fel_forward_cuda(&f.plan, &f.in, gpu.ptrs.data(), gpu.sizes.data(), 3, &eg);
  EXPECT(rc == rg && SameError(ec, eg));
  if (rc != FEL_OK || rg != FEL_OK) return false;
  for (size_t i = 0; i < cpu.tensors.size(); ++i) {
    EXPECT(cpu.tensors[i].size() == gpu.tensors[i].size());
    if (!cpu.tensors[i].empty()) {
      EXPECT(memcmp(cpu.tensors[i].data(), gpu.tensors[i].data(),
                    cpu.tensors[i].size() * sizeof(float)) == 0);
    }
  }
  // Backward with the forward outputs as layout gradients.
  std::vector<const float *> grads(cpu.ptrs.begin(), cpu.ptrs.end());
  std::vector<std::vector<float>> gc, gg;
  std::vector<float *> pc, pg;
  for (int32_t i = 0; i < f.in.num_embeddings; ++i) {
    gc.emplace_back(f.in.embedding_sizes[i], NAN);
    gg.emplace_back(f.in.embedding_sizes[i], NAN);
  }
  for (auto &g : gc) pc.push_back(g.data());
  for (auto &g : gg) pg.push_back(g.data());
  rc = fel_backward(&f.plan, &f.in, grads.data(), cpu.sizes.data(), 3, pc.data(), 2, &ec);
  rg = fel_backward_cuda(&f.plan, &f.in, grads.data(), cpu.sizes.data(), 3, pg.data(), &eg);
  EXPECT(rc == FEL_OK && rg == FEL_OK);
  for (size_t i = 0; i < gc.size(); ++i) {
    for (size_t j = 0; j < gc[i].size(); ++j) {
      EXPECT(fabsf(gc[i][j] - gg[i][j]) <= 1e-5f * (1 + fabsf(gc[i][j])));
    }
  }
  return true;
}

// Bench checks fel_forward_cuda_bench: it runs on valid input, rejects bad arguments and reports
// input errors like fel_forward_cuda.
void Bench() {
  Fixture f;
  Outputs out(f);
  double kernel_ms = -1, copy_ms = -1;
  fel_error e{};
  EXPECT(fel_forward_cuda_bench(&f.plan, &f.in, out.sizes.data(), 3, 3, 4096, &kernel_ms, &copy_ms, &e) == FEL_OK);
  EXPECT(kernel_ms >= 0 && copy_ms >= 0);
  EXPECT(fel_forward_cuda_bench(&f.plan, &f.in, out.sizes.data(), 3, 0, 4096, &kernel_ms, &copy_ms, &e) ==
         FEL_ERR_INPUT);
  EXPECT(e.a == FEL_INPUT_BENCH && e.b == 0);
  Outputs wrong(f);
  wrong.sizes[1] += 1;
  fel_error want{};
  EXPECT(fel_forward_cuda(&f.plan, &f.in, wrong.ptrs.data(), wrong.sizes.data(), 3, &want) == FEL_ERR_OUTPUT_SIZE);
  EXPECT(fel_forward_cuda_bench(&f.plan, &f.in, wrong.sizes.data(), 3, 1, 0, &kernel_ms, &copy_ms, &e) ==
         FEL_ERR_OUTPUT_SIZE);
  EXPECT(SameError(e, want));
  char msg[128];
  fel_cuda_error_string(100, msg, sizeof msg);
  EXPECT(strstr(msg, "cudaErrorNoDevice") != nullptr);
  fel_cuda_error_string(100, msg, 4);
  EXPECT(strlen(msg) == 3);
}

}  // namespace

int main() {
  // Without a device every comparison below would fail: say why once instead. Not run is not
  // passed, so this fails too.
  int32_t devices = 0;
  fel_error de{};
  if (fel_cuda_devices(&devices, &de) != FEL_OK) {
    char msg[256];
    fel_cuda_error_string(static_cast<int32_t>(de.a), msg, sizeof msg);
    fprintf(stderr, "no CUDA device (%s): the CUDA kernel cannot run here\n", msg);
    return 1;
  }
  {
    Fixture f;
    EXPECT(Compare(f));
  }
  Bench();
  std::mt19937_64 rng(7);
  int accepted = 0;
  for (int round = 0; round < 2000; ++round) {
    Fixture f;
    Corrupt(f, rng);
    accepted += Compare(f);
  }
  EXPECT(accepted > 0);
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("ok (%d accepted corruptions)\n", accepted);
  return 0;
}
