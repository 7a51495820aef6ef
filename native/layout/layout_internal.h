// Internals shared by the CPU kernel (layout_cpu.cc) and the CUDA kernel (layout.cu): input
// validation and the geometry of the embedding parts. Not part of the C ABI.
#ifndef MONOLITH_NATIVE_LAYOUT_LAYOUT_INTERNAL_H_
#define MONOLITH_NATIVE_LAYOUT_LAYOUT_INTERNAL_H_

#include <stdint.h>

#include <vector>

#include "native/layout/layout.h"

namespace fel {

// Part is one addressable embedding block: the part index of a fid offset (its high 32 bits)
// selects one. A fid's embedding row starts at float offset + position * stride of embeddings[emb].
struct Part {
  int32_t emb;     // index into the embeddings (or their gradients)
  int64_t offset;  // first float of the part in that embedding
  int64_t stride;  // floats per position unit: the row width (v1, v2) or 1 (v3, v4)
  int64_t width;   // row width that slices must fit in (v1, v2), or -1 (v3, v4: checked per fid)
  int64_t size;    // floats in the part
};

// FeatureRows says where the feature rows of one feature are.
struct FeatureRows {
  int64_t first;   // first feature row (index into feature_offset)
  int32_t present; // 0: the feature has no rows; its regions are zero
  int32_t shared;  // 1: one row for the whole batch
};

struct Prepared {
  std::vector<Part> parts;
  std::vector<FeatureRows> features;  // per sorted feature
};

// Prepare runs fel_validate's checks and, on success, fills p. Returns err->code.
int32_t Prepare(const fel_plan *plan, const fel_input *in, Prepared *p, fel_error *err);

// CheckTensors checks the output (or layout gradient) tensors against the plan and batch size;
// without need_ptrs only their sizes (nothing will be read or written through ptrs).
int32_t CheckTensors(const fel_plan *plan, int64_t batch, const void *const *ptrs,
                     const int64_t *sizes, int32_t n, fel_error *err, bool need_ptrs = true);

// FidRange returns the fids [*begin, *end) of feature row `row` (an index into feature_offset); it
// does not check them.
inline void FidRange(const fel_input *in, int64_t row, int64_t *begin, int64_t *end) {
  *begin = in->feature_offset[row];
  *end = row + 1 < in->num_feature_rows ? in->feature_offset[row + 1] : in->num_fids;
}

// Owner spreads embedding rows over threads for the backward pass; any function of (part,
// position) keeps every embedding row on one thread.
inline int32_t Owner(uint64_t fid_offset, int32_t threads) {
  // Multiply-shift maps the hash's high half onto [0, threads) without a division per fid.
  uint64_t h = fid_offset * 0x9E3779B97F4A7C15ull;
  return static_cast<int32_t>(((h >> 32) * static_cast<uint64_t>(threads)) >> 32);
}

}  // namespace fel

#endif  // MONOLITH_NATIVE_LAYOUT_LAYOUT_INTERNAL_H_
