// A small hand-checked op shared by the C++ tests (layout_test.cc, layout_cuda_test.cc).
#ifndef MONOLITH_NATIVE_LAYOUT_LAYOUT_TEST_FIXTURE_H_
#define MONOLITH_NATIVE_LAYOUT_LAYOUT_TEST_FIXTURE_H_

#include <math.h>
#include <stdint.h>

#include <random>
#include <vector>

#include "native/layout/layout.h"

namespace fel_test {

// A version 3 op over one table and two PS. Feature 0 "a": SUM, 3 floats per row; feature 1 "b":
// FIRSTN of 2, 2 floats per row, shared. Layouts (sorted): "addn" ADDN [-1, 1] of a[0:1] + a[2:3];
// "seq" NONE [-1, 2, 2] of b[0:2]; "sum" NONE [-1, 2] of a[1:3].
struct Fixture {
  std::vector<int32_t> table_features{0, 2};
  std::vector<int32_t> table_feature_dims{3, 2};
  std::vector<int32_t> max_end{3, 2};
  // feature, start, dims, pooling, max_seq, output, offset, seq_stride, addn, addn_first
  std::vector<fel_slice> slices{
      {0, 0, 1, FEL_SUM, 0, 0, 0, 0, 1, 1},
      {0, 2, 1, FEL_SUM, 0, 0, 0, 0, 1, 0},
      {1, 0, 2, FEL_FIRSTN, 2, 1, 0, 2, 0, 0},
      {0, 1, 2, FEL_SUM, 0, 2, 0, 0, 0, 0},
  };
  std::vector<int64_t> row_sizes{1, 4, 2};
  fel_plan plan{};

  // Part (t, ps0): a0 = [1 2 3], an unused a row, b0 = [7 8]; part (t, ps1): a1 = [100 200 300].
  std::vector<float> part0{1, 2, 3, 10, 20, 30, 7, 8};
  std::vector<float> part1{100, 200, 300};
  std::vector<const float *> embs;
  std::vector<int64_t> emb_sizes;
  // Batch of 2: a's rows are {a0, a1} and {a0, a0}; b's one (shared) row is {b0}.
  std::vector<uint64_t> fid_offset{0, 1ull << 32, 0, 0, 6};
  std::vector<int32_t> feature_offset{0, 2, 4};
  std::vector<uint32_t> nfl_offset{0, 2u | FEL_SHARED_BIT, 4};
  fel_input in{};

  Fixture() {
    plan.version = 3;
    plan.ps_num = 2;
    plan.num_features = 2;
    plan.num_tables = 1;
    plan.table_features = table_features.data();
    plan.table_feature_dims = table_feature_dims.data();
    plan.feature_max_end = max_end.data();
    plan.num_slices = static_cast<int32_t>(slices.size());
    plan.num_outputs = 3;
    plan.output_row_size = row_sizes.data();
    Refresh();
  }

  void Refresh() {
    plan.slices = slices.data();
    embs = {part0.data(), part1.data()};
    emb_sizes = {static_cast<int64_t>(part0.size()), static_cast<int64_t>(part1.size())};
    in.num_embeddings = 2;
    in.embeddings = embs.data();
    in.embedding_sizes = emb_sizes.data();
    in.fid_offset = fid_offset.data();
    in.num_fids = static_cast<int64_t>(fid_offset.size());
    in.feature_offset = feature_offset.data();
    in.num_feature_rows = static_cast<int64_t>(feature_offset.size());
    in.nfl_offset = nfl_offset.data();
    in.num_nfl = static_cast<int64_t>(nfl_offset.size());
    in.batch_size = 2;
  }
};

// Outputs are output tensors sized for a fixture's batch, filled with NaN so that unwritten floats
// show, and their pointer and size arrays.
struct Outputs {
  std::vector<std::vector<float>> tensors;
  std::vector<float *> ptrs;
  std::vector<int64_t> sizes;
  explicit Outputs(const Fixture &f) {
    for (size_t i = 0; i < f.row_sizes.size(); ++i) {
      tensors.emplace_back(f.in.batch_size > 0 ? f.in.batch_size * f.row_sizes[i] : 0, NAN);
    }
    for (auto &t : tensors) {
      ptrs.push_back(t.data());
      sizes.push_back(static_cast<int64_t>(t.size()));
    }
  }
};

// Forward runs the CPU kernel on f.
inline int32_t Forward(Fixture &f, std::vector<std::vector<float>> *out, int32_t threads,
                       fel_error *err) {
  Outputs o(f);
  int32_t rc = fel_forward(&f.plan, &f.in, o.ptrs.data(), o.sizes.data(),
                           static_cast<int32_t>(o.ptrs.size()), threads, err);
  *out = o.tensors;
  return rc;
}

// Corrupt makes one random change to f's inputs (a fid's part or position, a feature offset, an
// nfl entry or its shared bit, the batch size) that the kernels must either survive or reject.
inline void Corrupt(Fixture &f, std::mt19937_64 &rng) {
  switch (rng() % 4) {
    case 0: {
      uint64_t &fo = f.fid_offset[rng() % f.fid_offset.size()];
      fo = ((fo >> 32) + rng() % 3) << 32 | ((fo & 0xffffffffu) + rng() % 8);
      break;
    }
    case 1:
      f.feature_offset[rng() % f.feature_offset.size()] += static_cast<int32_t>(rng() % 5) - 2;
      break;
    case 2:
      f.nfl_offset[rng() % f.nfl_offset.size()] ^= (rng() % 2 ? FEL_SHARED_BIT : 1u);
      break;
    default:
      f.in.batch_size += static_cast<int64_t>(rng() % 5) - 2;
  }
}

}  // namespace fel_test

#endif  // MONOLITH_NATIVE_LAYOUT_LAYOUT_TEST_FIXTURE_H_
