// For the Go toolchain, which compiles this file into pkg/layout through a symlink: only with cgo.
//go:build cgo

// CPU kernel of the fused embedding-to-layout op (see layout.h for the contract).
//
// Everything is validated first (Prepare); the compute loops then index without checks.
//
// Forward splits the batch into contiguous row ranges, one per thread; each thread writes only its
// rows, visiting them row by row and slice by slice in plan order, so the embeddings of one
// example's fids stay in cache across the slices that read them. Fid offsets are decoded into
// embedding row pointers a block of rows ahead (reading fid_offset feature by feature, where it is
// contiguous), and the embedding rows of the next row are prefetched while a row is computed: the
// op is a gather of random embedding rows, bound by memory latency.
//
// Backward gives every embedding row to one thread (Owner, or whole parts for v3/v4) and each
// thread adds, in plan order, the contributions to its rows: no locks, no atomics, and the same
// float result for any number of threads.
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <thread>
#include <vector>

#include "native/layout/layout.h"
#include "native/layout/layout_internal.h"

// GCC deems a function whose only effect is __builtin_prefetch pure and deletes calls to it
// unless it is inlined first.
#if defined(__GNUC__)
#define FEL_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define FEL_ALWAYS_INLINE inline
#endif

namespace fel {
namespace {

constexpr uint32_t kNflMask = 0x7fffffffu;
// Below this many batch rows per thread, extra threads cost more than they save.
constexpr int64_t kMinRowsPerThread = 16;
constexpr int64_t kMinFidsPerThread = 256;
// The forward pass decodes fid offsets kBlockRows batch rows at a time, and prefetches embedding
// rows kPrefetchRows batch rows ahead.
constexpr int64_t kBlockRows = 16;
constexpr int64_t kPrefetchRows = 1;
// The backward pass walks one slice over the batch: it prefetches further ahead.
constexpr int64_t kBackwardPrefetchRows = 8;

int32_t Fail(fel_error *err, int32_t code, int64_t a = 0, int64_t b = 0, int64_t c = 0) {
  err->code = code;
  err->a = a;
  err->b = b;
  err->c = c;
  return code;
}

bool IsV2orV4(int32_t v) { return v == 2 || v == 4; }

int32_t CheckPlan(const fel_plan *pl, fel_error *err) {
  if (pl->version < 1 || pl->version > 4) return Fail(err, FEL_ERR_VERSION, pl->version);
  if (pl->num_features < 0 || pl->num_tables < 0 || pl->num_slices < 0 || pl->num_outputs < 0 ||
      !pl->table_features || (pl->num_features > 0 && (!pl->table_feature_dims || !pl->feature_max_end)) ||
      (pl->num_slices > 0 && !pl->slices) || (pl->num_outputs > 0 && !pl->output_row_size)) {
    return Fail(err, FEL_ERR_PLAN, FEL_PLAN_COUNTS);
  }
  if (IsV2orV4(pl->version) && pl->ps_num <= 0) {
    return Fail(err, FEL_ERR_PLAN, FEL_PLAN_PS_NUM, pl->ps_num);
  }
  if (pl->table_features[0] != 0 || pl->table_features[pl->num_tables] != pl->num_features) {
    return Fail(err, FEL_ERR_PLAN, FEL_PLAN_TABLES, pl->num_tables);
  }
  for (int32_t t = 0; t < pl->num_tables; ++t) {
    if (pl->table_features[t + 1] < pl->table_features[t]) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_TABLES, t);
    }
  }
  for (int32_t f = 0; f < pl->num_features; ++f) {
    if (pl->table_feature_dims[f] < 0) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_DIMS, f, pl->table_feature_dims[f]);
    }
    if (pl->feature_max_end[f] < 0) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_COLUMNS, -1, f);
    }
  }
  for (int32_t o = 0; o < pl->num_outputs; ++o) {
    if (pl->output_row_size[o] < 0) return Fail(err, FEL_ERR_PLAN, FEL_PLAN_REGION, -1, o);
  }
  for (int32_t s = 0; s < pl->num_slices; ++s) {
    const fel_slice &sl = pl->slices[s];
    if (sl.feature < 0 || sl.feature >= pl->num_features) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_FEATURE, s, sl.feature);
    }
    if (sl.start < 0 || sl.dims <= 0 ||
        static_cast<int64_t>(sl.start) + sl.dims > pl->feature_max_end[sl.feature]) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_COLUMNS, s, sl.start);
    }
    bool firstn = sl.pooling == FEL_FIRSTN;
    if ((sl.pooling != FEL_SUM && sl.pooling != FEL_MEAN && !firstn) ||
        (firstn && (sl.max_seq <= 0 || sl.addn))) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_POOLING, s, sl.pooling);
    }
    if (sl.output < 0 || sl.output >= pl->num_outputs) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_OUTPUT, s, sl.output);
    }
    // The region (max_seq positions seq_stride apart for FIRSTN) fits in the row; no overflow.
    const int64_t row = pl->output_row_size[sl.output];
    if (sl.offset < 0 || sl.offset > row || sl.dims > row - sl.offset ||
        (firstn && (sl.seq_stride < sl.dims ||
                    sl.max_seq - 1 > (row - sl.offset - sl.dims) / sl.seq_stride))) {
      return Fail(err, FEL_ERR_PLAN, FEL_PLAN_REGION, s, sl.offset);
    }
  }
  return FEL_OK;
}

int32_t CheckInputPointers(const fel_input *in, bool need_embedding_data, fel_error *err) {
  if (in->num_embeddings < 0 || (in->num_embeddings > 0 && !in->embedding_sizes) ||
      (need_embedding_data && in->num_embeddings > 0 && !in->embeddings)) {
    return Fail(err, FEL_ERR_INPUT, FEL_INPUT_EMBEDDINGS, -1);
  }
  for (int32_t i = 0; i < in->num_embeddings; ++i) {
    if (in->embedding_sizes[i] < 0 ||
        (need_embedding_data && in->embedding_sizes[i] > 0 && !in->embeddings[i])) {
      return Fail(err, FEL_ERR_INPUT, FEL_INPUT_EMBEDDINGS, i);
    }
  }
  if (in->num_fids < 0 || (in->num_fids > 0 && !in->fid_offset)) {
    return Fail(err, FEL_ERR_INPUT, FEL_INPUT_FID_OFFSET);
  }
  if (in->num_feature_rows < 0 || (in->num_feature_rows > 0 && !in->feature_offset)) {
    return Fail(err, FEL_ERR_INPUT, FEL_INPUT_FEATURE_OFFSET);
  }
  if (in->num_nfl < 0 || (in->num_nfl > 0 && !in->nfl_offset)) {
    return Fail(err, FEL_ERR_INPUT, FEL_INPUT_NFL_OFFSET);
  }
  return FEL_OK;
}

// BuildParts maps the version-specific embedding inputs to parts, as the reference op does when it
// builds its embeddings_data.
int32_t BuildParts(const fel_plan *pl, const fel_input *in, std::vector<Part> *parts,
                   fel_error *err) {
  const int32_t n = in->num_embeddings;
  const int64_t tables = pl->num_tables;
  switch (pl->version) {
    case 1: {
      if (!in->embedding_dims) return Fail(err, FEL_ERR_EMBEDDING_DIMS, 0, n);
      parts->reserve(n);
      for (int32_t i = 0; i < n; ++i) {
        int64_t size = in->embedding_sizes[i], dim = in->embedding_dims[i];
        if (dim <= 0 || size % dim != 0) return Fail(err, FEL_ERR_EMBEDDING_SHAPE, i, size, dim);
        parts->push_back(Part{i, 0, dim, dim, size});
      }
      return FEL_OK;
    }
    case 2: {
      const int64_t want = tables * pl->ps_num;
      if (n != want) return Fail(err, FEL_ERR_EMBEDDING_COUNT, n, want);
      if (in->num_row_splits != n) return Fail(err, FEL_ERR_ROW_SPLIT_COUNT, in->num_row_splits, n);
      if (n > 0 && (!in->row_splits || !in->row_split_sizes)) {
        return Fail(err, FEL_ERR_INPUT, FEL_INPUT_ROW_SPLITS, -1);
      }
      parts->reserve(static_cast<size_t>(pl->num_features) * pl->ps_num);
      for (int32_t t = 0; t < tables; ++t) {
        const int32_t f0 = pl->table_features[t], nf = pl->table_features[t + 1] - f0;
        for (int32_t p = 0; p < pl->ps_num; ++p) {
          const int32_t i = t * pl->ps_num + p;
          const int64_t len = in->row_split_sizes[i];
          if (len != nf + 1) return Fail(err, FEL_ERR_ROW_SPLIT_LENGTH, i, len, nf + 1);
          const int64_t *rs = in->row_splits[i];
          if (!rs) return Fail(err, FEL_ERR_INPUT, FEL_INPUT_ROW_SPLITS, i);
          const int64_t size = in->embedding_sizes[i];
          int64_t pre = 0, used = 0;
          for (int32_t j = 0; j < nf; ++j) {
            const int64_t v = rs[j + 1];
            if (v < pre) return Fail(err, FEL_ERR_ROW_SPLIT_ORDER, i, j + 1, v);
            const int64_t dim = pl->table_feature_dims[f0 + j], count = v - pre;
            // A feature without slice dims has empty rows.
            if (dim > 0 && count > (size - used) / dim) {
              return Fail(err, FEL_ERR_ROW_SPLIT_SIZE, i, j + 1, size);
            }
            parts->push_back(Part{i, used, dim, dim, count * dim});
            used += count * dim;
            pre = v;
          }
        }
      }
      return FEL_OK;
    }
    case 3:
      parts->reserve(n);
      for (int32_t i = 0; i < n; ++i) parts->push_back(Part{i, 0, 1, -1, in->embedding_sizes[i]});
      return FEL_OK;
    case 4: {
      if (n != 1) return Fail(err, FEL_ERR_EMBEDDING_COUNT, n, 1);
      const int64_t want = tables * pl->ps_num;
      if (in->num_emb_row_lengths != want) {
        return Fail(err, FEL_ERR_EMB_ROW_LENGTH_COUNT, in->num_emb_row_lengths, want);
      }
      if (want > 0 && !in->emb_row_lengths) {
        return Fail(err, FEL_ERR_INPUT, FEL_INPUT_EMB_ROW_LENGTHS, -1);
      }
      int64_t sum = 0;
      for (int64_t k = 0; k < want; ++k) {
        if (in->emb_row_lengths[k] < 0) {
          return Fail(err, FEL_ERR_EMB_ROW_LENGTH_VALUE, k, in->emb_row_lengths[k]);
        }
        sum += in->emb_row_lengths[k];
      }
      if (sum != in->embedding_sizes[0]) {
        return Fail(err, FEL_ERR_EMB_ROW_LENGTH_SUM, sum, in->embedding_sizes[0]);
      }
      // The lengths come ps-major ((ps, table) order); parts are table-major like fid offsets.
      parts->resize(want);
      int64_t pre = 0;
      for (int64_t k = 0; k < want; ++k) {
        const int64_t t = k % tables, p = k / tables;
        (*parts)[t * pl->ps_num + p] = Part{0, pre, 1, -1, in->emb_row_lengths[k]};
        pre += in->emb_row_lengths[k];
      }
      return FEL_OK;
    }
  }
  return Fail(err, FEL_ERR_VERSION, pl->version);
}

int32_t CheckFeatures(const fel_plan *pl, const fel_input *in, const std::vector<Part> &parts,
                      std::vector<FeatureRows> *features, fel_error *err) {
  const int64_t batch = in->batch_size, rows_total = in->num_feature_rows;
  const int64_t nparts = static_cast<int64_t>(parts.size());
  if (in->num_nfl < pl->num_features) {
    return Fail(err, FEL_ERR_NFL_LENGTH, in->num_nfl, pl->num_features);
  }
  features->assign(pl->num_features, FeatureRows{0, 0, 0});
  for (int32_t f = 0; f < pl->num_features; ++f) {
    const int64_t max_end = pl->feature_max_end[f];
    if (max_end == 0) continue;  // no slice reads it
    const uint32_t e = in->nfl_offset[f];
    const bool shared = (e & FEL_SHARED_BIT) != 0;
    const int64_t first = e & kNflMask;
    const int64_t next = f + 1 < in->num_nfl ? (in->nfl_offset[f + 1] & kNflMask) : rows_total;
    const int64_t count = next - first;
    if (count < 0) return Fail(err, FEL_ERR_NFL_ORDER, f, count);
    if (count == 0) continue;  // the feature is absent: its regions are zero
    const int64_t rows = shared ? std::min<int64_t>(1, batch) : batch;
    if (!shared && count < batch) return Fail(err, FEL_ERR_FEATURE_ROWS, f, count, batch);
    if (first + rows > rows_total) return Fail(err, FEL_ERR_FEATURE_RANGE, f, first, rows_total);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = first + r;
      const int64_t b = in->feature_offset[row];
      const int64_t end = row + 1 < rows_total ? in->feature_offset[row + 1] : in->num_fids;
      if (b < 0 || end < b || end > in->num_fids) return Fail(err, FEL_ERR_FID_RANGE, row, b, end);
      for (int64_t k = b; k < end; ++k) {
        const uint64_t fo = in->fid_offset[k];
        const int64_t part = static_cast<int64_t>(fo >> 32), pos = static_cast<int64_t>(fo & 0xffffffffu);
        if (part >= nparts) return Fail(err, FEL_ERR_FID_PART, k, part, nparts);
        const Part &pt = parts[part];
        if (pt.width >= 0 && max_end > pt.width) return Fail(err, FEL_ERR_FID_WIDTH, k, part, pt.width);
        // pos * stride + max_end <= size, without overflow.
        // v3/v4 strides are 1: no 64-bit division per fid (it dominated validation).
        if (max_end > pt.size ||
            (pt.stride == 1 ? pos > pt.size - max_end
                            : pt.stride > 0 && pos > (pt.size - max_end) / pt.stride)) {
          return Fail(err, FEL_ERR_FID_OFFSET, k, pos, pt.size);
        }
      }
    }
    (*features)[f] = FeatureRows{first, 1, shared ? 1 : 0};
  }
  return FEL_OK;
}

int32_t PrepareImpl(const fel_plan *pl, const fel_input *in, bool need_embedding_data,
                    Prepared *p, fel_error *err) {
  *err = fel_error{FEL_OK, 0, 0, 0};
  if (!pl || !in) return Fail(err, FEL_ERR_PLAN, FEL_PLAN_COUNTS);
  if (CheckPlan(pl, err)) return err->code;
  if (CheckInputPointers(in, need_embedding_data, err)) return err->code;
  p->parts.clear();
  if (BuildParts(pl, in, &p->parts, err)) return err->code;
  if (in->batch_size < 0) return Fail(err, FEL_ERR_BATCH_SIZE, in->batch_size);
  return CheckFeatures(pl, in, p->parts, &p->features, err);
}

// ---- compute ----

inline void Zero(float *dst, int32_t n) {
  for (int32_t i = 0; i < n; ++i) dst[i] = 0.0f;
}
inline void Assign(float *__restrict dst, const float *__restrict src, int32_t n) {
  for (int32_t i = 0; i < n; ++i) dst[i] = src[i];
}
inline void Add(float *__restrict dst, const float *__restrict src, int32_t n) {
  for (int32_t i = 0; i < n; ++i) dst[i] += src[i];
}
// MEAN divides every term (the reference's order), not the sum: same rounding as the reference.
inline void AssignMean(float *__restrict dst, const float *__restrict src, int32_t n, float count) {
  for (int32_t i = 0; i < n; ++i) dst[i] = src[i] / count;
}
inline void AddMean(float *__restrict dst, const float *__restrict src, int32_t n, float count) {
  for (int32_t i = 0; i < n; ++i) dst[i] += src[i] / count;
}

// RowFids holds the embedding rows of the fids of one batch row (or of the shared features' one
// row), decoded from fid_offset once and read by every slice of their feature.
struct RowFids {
  std::vector<const float *> rows;  // first float of each fid's embedding row, feature by feature
  std::vector<int64_t> begin;       // per decoded feature: its first entry in rows (+ one end)
  void Clear() {
    rows.clear();
    begin.clear();
  }
};

struct Kernel {
  const fel_plan *pl;
  const fel_input *in;
  const Prepared *prep;
  std::vector<float *> part_ptr;  // resolved first float of every part
  // Features that slices read, non-shared and shared, and each one's index among them (-1: none).
  std::vector<int32_t> row_features, shared_features, slot;

  void Init() {
    slot.assign(pl->num_features, -1);
    for (int32_t f = 0; f < pl->num_features; ++f) {
      const FeatureRows &fr = prep->features[f];
      if (pl->feature_max_end[f] == 0 || !fr.present) continue;
      std::vector<int32_t> &list = fr.shared ? shared_features : row_features;
      slot[f] = static_cast<int32_t>(list.size());
      list.push_back(f);
    }
  }

  const float *Row(uint64_t fo) const {
    return part_ptr[fo >> 32] + static_cast<int64_t>(fo & 0xffffffffu) * prep->parts[fo >> 32].stride;
  }

  // Decode fills rows[0 .. n) with the fids of batch rows r .. r + n of `features` (shared
  // features: their one row). It reads fid_offset feature by feature, where it is contiguous.
  void Decode(const std::vector<int32_t> &features, int64_t r, int64_t n, RowFids *rows) const {
    for (int64_t j = 0; j < n; ++j) rows[j].Clear();
    for (int32_t f : features) {
      const FeatureRows &fr = prep->features[f];
      for (int64_t j = 0; j < n; ++j) {
        RowFids &d = rows[j];
        d.begin.push_back(static_cast<int64_t>(d.rows.size()));
        int64_t b, e;
        FidRange(in, fr.first + (fr.shared ? 0 : r + j), &b, &e);
        for (int64_t k = b; k < e; ++k) d.rows.push_back(Row(in->fid_offset[k]));
      }
    }
    for (int64_t j = 0; j < n; ++j) rows[j].begin.push_back(static_cast<int64_t>(rows[j].rows.size()));
  }

  // PrefetchFeature asks for the embedding rows of decoded feature i in a batch row ahead: the
  // gathers are latency-bound, and the hardware prefetcher cannot guess random embedding rows.
  // Called when the first slice reading the feature runs, it spreads the prefetches over the
  // computation instead of issuing them in bursts.
  FEL_ALWAYS_INLINE void PrefetchFeature(const RowFids &d, int64_t i) const {
    const int64_t bytes = static_cast<int64_t>(pl->feature_max_end[row_features[i]]) * sizeof(float);
    for (int64_t k = d.begin[i]; k < d.begin[i + 1]; ++k) {
      const char *row = reinterpret_cast<const char *>(d.rows[k]);
      for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(row + at);
    }
  }

  // Prefetch asks for all embedding rows of a decoded batch row (before the first rows).
  FEL_ALWAYS_INLINE void Prefetch(const RowFids &d) const {
    for (size_t i = 0; i + 1 < d.begin.size(); ++i) PrefetchFeature(d, static_cast<int64_t>(i));
  }

  // Pool writes the pooled value of embedding rows [p, p + n) into a slice region (the reference's
  // GatherEmb with init = true: the first term is copied, later ones added; FIRSTN copies the
  // first max_seq and zeroes the other positions).
  static void Pool(const fel_slice &s, const float *const *p, int64_t n, float *dst) {
    const int32_t c0 = s.start;
    switch (s.pooling) {
      case FEL_SUM:
        if (n == 0) {
          Zero(dst, s.dims);
          return;
        }
        Assign(dst, p[0] + c0, s.dims);
        for (int64_t k = 1; k < n; ++k) Add(dst, p[k] + c0, s.dims);
        return;
      case FEL_MEAN: {
        if (n == 0) {
          Zero(dst, s.dims);
          return;
        }
        const float count = static_cast<float>(n);
        AssignMean(dst, p[0] + c0, s.dims, count);
        for (int64_t k = 1; k < n; ++k) AddMean(dst, p[k] + c0, s.dims, count);
        return;
      }
      default: {  // FEL_FIRSTN
        const int64_t copied = std::min<int64_t>(n, s.max_seq);
        for (int64_t k = 0; k < copied; ++k) Assign(dst + k * s.seq_stride, p[k] + c0, s.dims);
        for (int64_t k = copied; k < s.max_seq; ++k) Zero(dst + k * s.seq_stride, s.dims);
        return;
      }
    }
  }

  // Accumulate adds every term of embedding rows [p, p + n) into an ADDN region (non-shared ADDN
  // in the reference).
  static void Accumulate(const fel_slice &s, const float *const *p, int64_t n, float *dst) {
    const int32_t c0 = s.start;
    if (s.dims == 1) {  // the common "bias" slice
      float v = dst[0];
      if (s.pooling == FEL_MEAN) {
        const float count = static_cast<float>(n);
        for (int64_t k = 0; k < n; ++k) v += p[k][c0] / count;
      } else {
        for (int64_t k = 0; k < n; ++k) v += p[k][c0];
      }
      dst[0] = v;
      return;
    }
    if (s.pooling == FEL_MEAN) {
      const float count = static_cast<float>(n);
      for (int64_t k = 0; k < n; ++k) AddMean(dst, p[k] + c0, s.dims, count);
    } else {
      for (int64_t k = 0; k < n; ++k) Add(dst, p[k] + c0, s.dims);
    }
  }

  static void ZeroRegion(const fel_slice &s, float *dst) {
    if (s.pooling == FEL_FIRSTN) {
      for (int64_t k = 0; k < s.max_seq; ++k) Zero(dst + k * s.seq_stride, s.dims);
    } else {
      Zero(dst, s.dims);
    }
  }

  void ForwardRows(float *const *outputs, int64_t r0, int64_t r1) const {
    if (r0 >= r1) return;
    const int32_t ns = pl->num_slices;
    RowFids shared;
    Decode(shared_features, 0, 1, &shared);
    // The pooled value of a shared feature in an ADDN layout, computed once per thread.
    std::vector<int64_t> tmp_at(ns, -1);
    int64_t tmp_size = 0;
    for (int32_t s = 0; s < ns; ++s) {
      const fel_slice &sl = pl->slices[s];
      const FeatureRows &fr = prep->features[sl.feature];
      if (sl.addn && fr.present && fr.shared) {
        tmp_at[s] = tmp_size;
        tmp_size += sl.dims;
      }
    }
    std::vector<float> tmp(tmp_size);
    for (int32_t s = 0; s < ns; ++s) {
      if (tmp_at[s] < 0) continue;
      const fel_slice &sl = pl->slices[s];
      const int64_t i = slot[sl.feature];
      Pool(sl, shared.rows.data() + shared.begin[i], shared.begin[i + 1] - shared.begin[i],
           tmp.data() + tmp_at[s]);
    }
    // first_reader[s]: slice s is the first (in plan order) to read its non-shared feature.
    std::vector<char> first_reader(ns, 0);
    {
      std::vector<char> seen(pl->num_features, 0);
      for (int32_t s = 0; s < ns; ++s) {
        const int32_t f = pl->slices[s].feature;
        if (slot[f] >= 0 && !prep->features[f].shared && !seen[f]) first_reader[s] = seen[f] = 1;
      }
    }
    // Batch rows are decoded a block ahead; the embedding rows of row r + kPrefetchRows are
    // prefetched while row r is computed.
    std::vector<RowFids> blocks(2 * kBlockRows);
    auto decoded = [&](int64_t r) -> RowFids & { return blocks[(r - r0) % (2 * kBlockRows)]; };
    auto decode_block = [&](int64_t r) {
      if (r < r1) Decode(row_features, r, std::min(kBlockRows, r1 - r), &decoded(r));
    };
    decode_block(r0);
    for (int64_t r = r0; r < std::min(r1, r0 + kPrefetchRows); ++r) Prefetch(decoded(r));
    for (int64_t r = r0; r < r1; ++r) {
      if ((r - r0) % kBlockRows == 0) decode_block(r + kBlockRows);
      const RowFids &cur = decoded(r);
      const RowFids *ahead = r + kPrefetchRows < r1 ? &decoded(r + kPrefetchRows) : nullptr;
      for (int32_t s = 0; s < ns; ++s) {
        const fel_slice &sl = pl->slices[s];
        const FeatureRows &fr = prep->features[sl.feature];
        float *dst = outputs[sl.output] + r * pl->output_row_size[sl.output] + sl.offset;
        const RowFids &d = fr.shared ? shared : cur;
        const int64_t i = slot[sl.feature];
        if (ahead && first_reader[s]) PrefetchFeature(*ahead, i);
        const float *const *p = i >= 0 ? d.rows.data() + d.begin[i] : nullptr;
        const int64_t n = i >= 0 ? d.begin[i + 1] - d.begin[i] : 0;
        if (sl.addn) {
          if (sl.addn_first && !(fr.present && fr.shared)) Zero(dst, sl.dims);
          if (!fr.present) continue;
          if (fr.shared) {
            const float *t = tmp.data() + tmp_at[s];
            if (sl.addn_first) {
              Assign(dst, t, sl.dims);
            } else {
              Add(dst, t, sl.dims);
            }
          } else {
            Accumulate(sl, p, n, dst);
          }
          continue;
        }
        if (!fr.present) {
          ZeroRegion(sl, dst);
        } else {
          Pool(sl, p, n, dst);  // a shared feature is pooled again for every row: the same floats
        }
      }
    }
  }

  const float *Src(uint64_t fo, int32_t start) const { return Row(fo) + start; }

  // ZeroOwned zeroes the embedding gradient floats thread `self` owns (BackwardOwned's split);
  // thread 0 also zeroes the floats outside every part (v2: past the last row split).
  void ZeroOwned(float *const *emb_grads, int32_t self, int32_t threads) const {
    if (threads == 1) {
      for (int32_t e = 0; e < in->num_embeddings; ++e) {
        if (in->embedding_sizes[e] > 0) memset(emb_grads[e], 0, sizeof(float) * in->embedding_sizes[e]);
      }
      return;
    }
    const bool by_part = pl->version >= 3;
    std::vector<int64_t> covered(in->num_embeddings, 0);  // parts are prefixes of their embedding
    for (size_t pi = 0; pi < prep->parts.size(); ++pi) {
      const Part &pt = prep->parts[pi];
      covered[pt.emb] = std::max(covered[pt.emb], pt.offset + pt.size);
      float *base = emb_grads[pt.emb] ? emb_grads[pt.emb] + pt.offset : nullptr;
      if (pt.size == 0) continue;
      if (by_part) {
        if (static_cast<int64_t>(pi % threads) == self) memset(base, 0, sizeof(float) * pt.size);
        continue;
      }
      for (int64_t pos = 0; pos < pt.size / pt.stride; ++pos) {
        if (Owner(static_cast<uint64_t>(pi) << 32 | static_cast<uint64_t>(pos), threads) == self) {
          memset(base + pos * pt.stride, 0, sizeof(float) * pt.stride);
        }
      }
    }
    if (self != 0) return;
    for (int32_t e = 0; e < in->num_embeddings; ++e) {
      if (in->embedding_sizes[e] > covered[e]) {
        memset(emb_grads[e] + covered[e], 0, sizeof(float) * (in->embedding_sizes[e] - covered[e]));
      }
    }
  }

  // Owned lists the fids of one feature whose embedding rows a thread owns, batch row by batch row
  // (one row for a shared feature): the thread walks only these.
  struct Owned {
    std::vector<int64_t> row_begin;  // per feature row: first entry in fids (+ one end)
    std::vector<int64_t> fids;       // fid positions (indices into fid_offset)
  };

  // BackwardOwned adds, in plan order (slice, batch row, fid), the contributions to the embedding
  // rows owned by `self`: every embedding float gets its terms in the same order for any number of
  // threads. v1/v2 positions are rows, spread by hash; v3/v4 positions are float offsets that
  // malformed offsets could make overlap, so whole parts are owned.
  void BackwardOwned(const float *const *grads, int32_t self, int32_t threads) const {
    const int64_t batch = in->batch_size;
    const bool by_part = pl->version >= 3;
    const uint64_t *fo = in->fid_offset;
    auto mine = [&](uint64_t f) {
      if (threads == 1) return true;
      return (by_part ? static_cast<int32_t>((f >> 32) % threads) : Owner(f, threads)) == self;
    };
    // The owned fids of every feature that slices read, built once for all its slices (one
    // thread owns all: it walks fid_offset directly).
    std::vector<Owned> owned(pl->num_features);
    for (int32_t f = 0; threads > 1 && f < pl->num_features; ++f) {
      if (slot[f] < 0) continue;
      const FeatureRows &fr = prep->features[f];
      Owned &o = owned[f];
      const int64_t rows = fr.shared ? std::min<int64_t>(1, batch) : batch;  // the validated rows
      o.row_begin.reserve(rows + 1);
      for (int64_t r = 0; r < rows; ++r) {
        o.row_begin.push_back(static_cast<int64_t>(o.fids.size()));
        int64_t b, e;
        FidRange(in, fr.first + r, &b, &e);
        for (int64_t k = b; k < e; ++k) {
          if (mine(fo[k])) o.fids.push_back(k);
        }
      }
      o.row_begin.push_back(static_cast<int64_t>(o.fids.size()));
    }
    for (int32_t s = 0; s < pl->num_slices; ++s) {
      const fel_slice &sl = pl->slices[s];
      const FeatureRows &fr = prep->features[sl.feature];
      if (!fr.present) continue;
      const Owned &o = owned[sl.feature];
      const int64_t row_size = pl->output_row_size[sl.output];
      const int64_t first_byte = sl.start * sizeof(float) & ~63;
      const int64_t end_byte = (sl.start + sl.dims) * sizeof(float);
      // fid_range(row) is the range of positions of feature row `row` in `ids` (the owned list,
      // or fid_offset itself for one thread); id(i) the fid position.
      auto for_owned = [&](int64_t row, auto fn) {
        if (threads == 1) {
          int64_t b, e;
          FidRange(in, fr.first + row, &b, &e);
          for (int64_t k = b; k < e; ++k) fn(k);
        } else {
          for (int64_t i = o.row_begin[row]; i < o.row_begin[row + 1]; ++i) fn(o.fids[i]);
        }
      };
      for (int64_t r = 0; r < batch; ++r) {
        // Ask for the embedding rows (to be written) and the layout gradients of row r + ahead.
        if (!fr.shared && r + kBackwardPrefetchRows < batch) {
          for_owned(r + kBackwardPrefetchRows, [&](int64_t k) {
            const char *row = reinterpret_cast<const char *>(Row(fo[k]));
            for (int64_t at = first_byte; at < end_byte; at += 64) __builtin_prefetch(row + at, 1);
          });
          __builtin_prefetch(grads[sl.output] + (r + kBackwardPrefetchRows) * row_size + sl.offset);
        }
        const int64_t fr_row = fr.shared ? 0 : r;
        if (threads > 1 && o.row_begin[fr_row] == o.row_begin[fr_row + 1]) continue;
        const float *g = grads[sl.output] + r * row_size + sl.offset;
        int64_t b, e;
        FidRange(in, fr.first + fr_row, &b, &e);
        const float count = static_cast<float>(e - b);
        for_owned(fr_row, [&](int64_t k) {
          float *dst = const_cast<float *>(Src(fo[k], sl.start));
          switch (sl.pooling) {
            case FEL_SUM:
              Add(dst, g, sl.dims);
              break;
            case FEL_MEAN:
              AddMean(dst, g, sl.dims, count);
              break;
            default:  // FIRSTN: the first max_seq fids only
              if (k - b < sl.max_seq) Add(dst, g + (k - b) * sl.seq_stride, sl.dims);
              break;
          }
        });
      }
    }
  }
};

// Run calls fn(i) for i in [0, n) on n threads (the caller's thread runs i = 0).
template <typename Fn>
void Run(int32_t n, const Fn &fn) {
  std::vector<std::thread> workers;
  int32_t started = 1;
  try {
    workers.reserve(n - 1);
    for (int32_t i = 1; i < n; ++i, ++started) workers.emplace_back([&fn, i] { fn(i); });
  } catch (...) {
    // Out of threads: the missing shares run here, after ours.
  }
  fn(0);
  for (int32_t i = started; i < n; ++i) fn(i);
  for (auto &w : workers) w.join();
}

int32_t ResolveParts(const Prepared &p, const float *const *bases, std::vector<float *> *out) {
  out->resize(p.parts.size());
  for (size_t i = 0; i < p.parts.size(); ++i) {
    const Part &pt = p.parts[i];
    // An empty embedding may have no storage; nothing is read from an empty part.
    (*out)[i] = bases[pt.emb] ? const_cast<float *>(bases[pt.emb]) + pt.offset : nullptr;
  }
  return FEL_OK;
}

}  // namespace

int32_t Prepare(const fel_plan *plan, const fel_input *in, Prepared *p, fel_error *err) {
  return PrepareImpl(plan, in, false, p, err);
}

int32_t CheckTensors(const fel_plan *pl, int64_t batch, const void *const *ptrs,
                     const int64_t *sizes, int32_t n, fel_error *err) {
  if (n != pl->num_outputs) return Fail(err, FEL_ERR_OUTPUT_COUNT, n, pl->num_outputs);
  if (n > 0 && (!ptrs || !sizes)) return Fail(err, FEL_ERR_INPUT, FEL_INPUT_OUTPUTS, -1);
  for (int32_t i = 0; i < n; ++i) {
    const int64_t row = pl->output_row_size[i];
    if (row > 0 && batch > INT64_MAX / row) return Fail(err, FEL_ERR_OUTPUT_SIZE, i, sizes[i], -1);
    const int64_t want = batch * row;
    if (sizes[i] != want) return Fail(err, FEL_ERR_OUTPUT_SIZE, i, sizes[i], want);
    if (want > 0 && !ptrs[i]) return Fail(err, FEL_ERR_INPUT, FEL_INPUT_OUTPUTS, i);
  }
  return FEL_OK;
}

}  // namespace fel

extern "C" {

int32_t fel_validate(const fel_plan *plan, const fel_input *in, fel_error *err) {
  try {
    fel::Prepared p;
    return fel::PrepareImpl(plan, in, false, &p, err);
  } catch (const std::bad_alloc &) {
    return fel::Fail(err, FEL_ERR_RESOURCE, 0);
  }
}

int32_t fel_forward(const fel_plan *plan, const fel_input *in, float *const *outputs,
                    const int64_t *output_sizes, int32_t num_outputs, int32_t threads,
                    fel_error *err) {
  try {
    fel::Prepared p;
    if (fel::PrepareImpl(plan, in, true, &p, err)) return err->code;
    if (fel::CheckTensors(plan, in->batch_size, reinterpret_cast<const void *const *>(outputs),
                          output_sizes, num_outputs, err)) {
      return err->code;
    }
    fel::Kernel k{plan, in, &p, {}, {}, {}, {}};
    fel::ResolveParts(p, in->embeddings, &k.part_ptr);
    k.Init();
    const int64_t batch = in->batch_size;
    int32_t n = static_cast<int32_t>(
        std::max<int64_t>(1, std::min<int64_t>(threads, batch / fel::kMinRowsPerThread)));
    fel::Run(n, [&](int32_t i) { k.ForwardRows(outputs, batch * i / n, batch * (i + 1) / n); });
    return FEL_OK;
  } catch (const std::bad_alloc &) {
    return fel::Fail(err, FEL_ERR_RESOURCE, 0);
  }
}

int32_t fel_backward(const fel_plan *plan, const fel_input *in, const float *const *grads,
                     const int64_t *grad_sizes, int32_t num_grads, float *const *emb_grads,
                     int32_t threads, fel_error *err) {
  try {
    fel::Prepared p;
    if (fel::PrepareImpl(plan, in, false, &p, err)) return err->code;
    if (fel::CheckTensors(plan, in->batch_size, reinterpret_cast<const void *const *>(grads),
                          grad_sizes, num_grads, err)) {
      return err->code;
    }
    if (in->num_embeddings > 0 && !emb_grads) {
      return fel::Fail(err, FEL_ERR_INPUT, FEL_INPUT_EMBEDDINGS, -1);
    }
    for (int32_t i = 0; i < in->num_embeddings; ++i) {
      if (in->embedding_sizes[i] > 0 && !emb_grads[i]) {
        return fel::Fail(err, FEL_ERR_INPUT, FEL_INPUT_EMBEDDINGS, i);
      }
    }
    fel::Kernel k{plan, in, &p, {}, {}, {}, {}};
    fel::ResolveParts(p, emb_grads, &k.part_ptr);
    k.Init();
    const int32_t n = static_cast<int32_t>(
        std::max<int64_t>(1, std::min<int64_t>(threads, in->num_fids / fel::kMinFidsPerThread)));
    // Each thread zeroes the embedding rows it owns, then adds into them: its lines stay in its
    // cache, and no barrier separates the two.
    fel::Run(n, [&](int32_t i) {
      k.ZeroOwned(emb_grads, i, n);
      k.BackwardOwned(grads, i, n);
    });
    return FEL_OK;
  } catch (const std::bad_alloc &) {
    return fel::Fail(err, FEL_ERR_RESOURCE, 0);
  }
}

}  // extern "C"
