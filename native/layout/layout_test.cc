// Tests of the CPU kernel through its C ABI, for Bazel (cc_test, also built with AddressSanitizer):
// hand-computed forward and backward results, every input error, and random corruptions of the
// offsets, which must be rejected or computed without reading out of bounds. The full comparison
// with the Go oracle is in pkg/layout (go test).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <random>
#include <thread>
#include <vector>

#include "native/layout/layout.h"
#include "native/layout/layout_test_fixture.h"

#if defined(__SANITIZE_ADDRESS__)
// Leak checking needs ptrace, which test sandboxes may forbid; this test is about stray reads and
// writes.
extern "C" const char *__asan_default_options() { return "detect_leaks=0"; }
#endif

namespace {

using fel_test::Corrupt;
using fel_test::Fixture;
using fel_test::Forward;
using fel_test::Outputs;

int failures = 0;

#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

void TestForward() {
  Fixture f;
  std::vector<std::vector<float>> out;
  fel_error err{};
  EXPECT(Forward(f, &out, 1, &err) == FEL_OK);
  // addn row 0: a0[0] + a1[0] + a0[2] + a1[2] = (1 + 100) + (3 + 300); row 1: (1 + 1) + (3 + 3).
  EXPECT(out[0][0] == 404 && out[0][1] == 8);
  // seq: b is shared, one fid b0 = [7 8], padded to 2 positions, on both rows.
  const float seq[] = {7, 8, 0, 0, 7, 8, 0, 0};
  EXPECT(memcmp(out[1].data(), seq, sizeof(seq)) == 0);
  // sum: a[1:3] pooled: row 0 [2+200, 3+300], row 1 [2+2, 3+3].
  const float sum[] = {202, 303, 4, 6};
  EXPECT(memcmp(out[2].data(), sum, sizeof(sum)) == 0);

  std::vector<std::vector<float>> again;
  EXPECT(Forward(f, &again, 4, &err) == FEL_OK);
  EXPECT(again == out);
}

void TestBackward() {
  Fixture f;
  std::vector<std::vector<float>> grads{{1, 2}, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1}};
  std::vector<const float *> gp{grads[0].data(), grads[1].data(), grads[2].data()};
  std::vector<int64_t> gs{2, 8, 4};
  std::vector<float> g0(f.part0.size(), NAN), g1(f.part1.size(), NAN);
  std::vector<float *> ep{g0.data(), g1.data()};
  fel_error err{};
  EXPECT(fel_backward(&f.plan, &f.in, gp.data(), gs.data(), 3, ep.data(), 2, &err) == FEL_OK);
  // a0 is used once in row 0 and twice in row 1: columns 0 and 2 get the addn gradients
  // 1 + 2 + 2, columns 1 and 2 the sum gradients 1 + 1 + 1; b0 gets position 0 of both rows.
  const float want0[] = {5, 3, 3 + 5, 0, 0, 0, 2, 2};
  EXPECT(memcmp(g0.data(), want0, sizeof(want0)) == 0);
  const float want1[] = {1, 1, 1 + 1};
  EXPECT(memcmp(g1.data(), want1, sizeof(want1)) == 0);
}

void ExpectError(Fixture &f, int32_t code, const char *what, int32_t threads = 2) {
  std::vector<std::vector<float>> out;
  fel_error err{};
  int32_t rc = Forward(f, &out, threads, &err);
  if (rc != code || err.code != code) {
    fprintf(stderr, "%s: code %d (%lld %lld %lld), want %d\n", what, rc, (long long)err.a,
            (long long)err.b, (long long)err.c, code);
    ++failures;
  }
}

void TestErrors() {
  {
    Fixture f;
    f.plan.version = 5;
    ExpectError(f, FEL_ERR_VERSION, "version");
  }
  {
    Fixture f;
    f.slices[3].dims = 9;
    f.Refresh();
    ExpectError(f, FEL_ERR_PLAN, "slice past feature_max_end");
  }
  {
    Fixture f;
    f.in.batch_size = -1;
    ExpectError(f, FEL_ERR_BATCH_SIZE, "batch");
  }
  {
    // The threads start before the checks (a batch this size asks for all 8): a failed check
    // stops them and returns.
    Fixture f;
    f.in.batch_size = 1 << 20;
    ExpectError(f, FEL_ERR_FEATURE_ROWS, "batch larger than the feature rows, 8 threads", 8);
    std::vector<float *> grads(3, nullptr), emb(2, nullptr);
    std::vector<int64_t> sizes(3, 0);
    fel_error err{};
    f.in.num_fids = 1 << 20;
    EXPECT(fel_backward(&f.plan, &f.in, grads.data(), sizes.data(), 3, emb.data(), 8, &err) != FEL_OK);
  }
  {
    Fixture f;
    f.in.num_nfl = 1;
    ExpectError(f, FEL_ERR_NFL_LENGTH, "nfl length");
  }
  {
    Fixture f;
    f.nfl_offset[1] = 5;
    ExpectError(f, FEL_ERR_NFL_ORDER, "nfl order");
  }
  {
    Fixture f;
    f.in.batch_size = 3;
    ExpectError(f, FEL_ERR_FEATURE_ROWS, "feature rows");
  }
  {
    Fixture f;
    f.feature_offset[1] = 9;
    ExpectError(f, FEL_ERR_FID_RANGE, "fid range");
  }
  {
    Fixture f;
    f.fid_offset[1] = 7ull << 32;
    ExpectError(f, FEL_ERR_FID_PART, "fid part");
  }
  {
    Fixture f;
    f.fid_offset[1] = (1ull << 32) | 1;  // a's 3 floats from offset 1 of a 3-float part
    ExpectError(f, FEL_ERR_FID_OFFSET, "fid offset");
  }
  {
    Fixture f;
    f.fid_offset[1] = (1ull << 32) | 0xffffffffu;
    ExpectError(f, FEL_ERR_FID_OFFSET, "fid offset sign bit");
  }
  {
    Fixture f;
    f.plan.version = 4;
    ExpectError(f, FEL_ERR_EMBEDDING_COUNT, "v4 embedding count");
  }
  {
    Fixture f;
    f.plan.version = 1;
    ExpectError(f, FEL_ERR_EMBEDDING_DIMS, "v1 without dims");
  }
  {
    Fixture f;
    f.plan.version = 2;
    ExpectError(f, FEL_ERR_ROW_SPLIT_COUNT, "v2 without row splits");
  }
  {
    Fixture f;
    f.in.fid_offset = nullptr;
    ExpectError(f, FEL_ERR_INPUT, "null fid_offset");
  }
  {
    // Sizes that would overflow int64 arithmetic: rejected by fel_validate, which reads no
    // embedding data (there is none this large).
    Fixture f;
    f.plan.version = 1;
    const int64_t dims[] = {int64_t(1) << 39, 3};
    const int64_t sizes[] = {int64_t(1) << 40, 3};
    f.in.embedding_dims = dims;
    f.in.embedding_sizes = sizes;
    f.fid_offset[0] = 0xffffffffu;  // row 2^32 - 1 of 2^39-float rows
    fel_error err{};
    EXPECT(fel_validate(&f.plan, &f.in, &err) == FEL_ERR_FID_OFFSET);
    Outputs o(f);
    std::vector<int64_t> huge(o.sizes.size(), 0);
    // All features shared: nothing bounds the batch but the outputs, whose size would overflow.
    f.fid_offset[0] = 0;
    f.in.embedding_dims = nullptr;
    f.plan.version = 3;
    f.Refresh();
    f.nfl_offset[0] |= FEL_SHARED_BIT;
    f.in.batch_size = INT64_MAX / 3;
    huge[0] = f.in.batch_size;  // output 0 has one float per row; output 1 has four: overflow
    EXPECT(fel_forward(&f.plan, &f.in, o.ptrs.data(), huge.data(), 3, 1, &err) == FEL_ERR_OUTPUT_SIZE);
    EXPECT(err.a == 1 && err.c == -1);
  }
}

// Random corruptions of a valid input: the kernel rejects them or computes them, with the same
// result on one and on several threads, and (under AddressSanitizer) without stray reads.
void TestCorruptions() {
  std::mt19937_64 rng(42);
  int accepted = 0, rejected = 0;
  for (int round = 0; round < 3000; ++round) {
    Fixture f;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) Corrupt(f, rng);
    std::vector<std::vector<float>> one, many;
    fel_error e1{}, e2{};
    int32_t r1 = Forward(f, &one, 1, &e1);
    int32_t r2 = Forward(f, &many, 3, &e2);
    EXPECT(r1 == r2 && e1.code == e2.code && e1.a == e2.a && e1.b == e2.b && e1.c == e2.c);
    if (r1 == FEL_OK) {
      ++accepted;
      for (size_t i = 0; i < one.size(); ++i) {
        EXPECT(one[i] == many[i] || (one[i].size() == many[i].size() && one[i].size() > 0 &&
                                      memcmp(one[i].data(), many[i].data(),
                                             one[i].size() * sizeof(float)) == 0));
      }
    } else {
      ++rejected;
    }
  }
  EXPECT(accepted > 0 && rejected > 0);
}

// Wide makes f's batch `batch` rows: row r of feature a takes 1 + r % 3 fids, a0 and a1 in turn
// from r; b stays shared.
void Wide(Fixture *f, int64_t batch) {
  f->fid_offset.clear();
  f->feature_offset.clear();
  for (int64_t r = 0; r < batch; ++r) {
    f->feature_offset.push_back(static_cast<int32_t>(f->fid_offset.size()));
    for (int64_t k = 0; k <= r % 3; ++k) f->fid_offset.push_back(static_cast<uint64_t>((r + k) % 2) << 32);
  }
  f->feature_offset.push_back(static_cast<int32_t>(f->fid_offset.size()));
  f->fid_offset.push_back(6);  // b0
  f->nfl_offset = {0, static_cast<uint32_t>(batch) | FEL_SHARED_BIT};
  f->Refresh();
  f->in.batch_size = batch;
}

// Calls on many threads at once (the process's team serves one, the others start their own),
// asking for 1 to 9 threads: each gets the result of a call on one thread. Under ThreadSanitizer
// this checks the team's hand-offs.
void TestConcurrentCalls() {
  Fixture base;
  Wide(&base, 1000);
  std::vector<std::vector<float>> want;
  fel_error err{};
  EXPECT(Forward(base, &want, 1, &err) == FEL_OK);
  // "sum" is a[1:3] pooled: row 0 has a0 = [2 3], row 1 a1 + a0 = [200+2 300+3].
  EXPECT(want[2][0] == 2 && want[2][1] == 3 && want[2][2] == 202 && want[2][3] == 303);
  std::vector<std::thread> callers;
  std::vector<int> bad(6, 0);
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&, c] {
      Fixture f;
      Wide(&f, 1000);
      for (int round = 0; round < 20; ++round) {
        std::vector<std::vector<float>> got;
        fel_error e{};
        if (Forward(f, &got, 1 + (c + round) % 9, &e) != FEL_OK || got != want) ++bad[c];
      }
    });
  }
  for (auto &t : callers) t.join();
  for (int c = 0; c < 6; ++c) EXPECT(bad[c] == 0);
}

}  // namespace

int main() {
  TestForward();
  TestBackward();
  TestErrors();
  TestCorruptions();
  TestConcurrentCalls();
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
