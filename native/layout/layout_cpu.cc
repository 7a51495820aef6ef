// For the Go toolchain, which compiles this file into pkg/layout through a symlink: only with cgo.
//go:build cgo

// CPU kernel of the fused embedding-to-layout op (see layout.h for the contract).
//
// Inputs are validated before any compute (Prepare), except, for the forward pass, the fids of
// non-shared features: those are checked block by block just before they are read (the prefetch
// loop checks each fid against per-part limits), saving a pass over fid_offset. Any fault stops
// the pass and reruns the exact checks, so the error reported is the first in order, as
// fel_validate would report it. The compute loops then index without checks.
//
// Forward hands out blocks of kBlockRows batch rows to its threads as they come free (a shared
// counter, so a thread that another process delays holds up the pass by one block at most). A
// thread runs its block one feature at a time, all the slices of that feature row by row: each
// embedding row is read once for all of them (pooled in registers), the fids come straight
// from fid_offset (contiguous for a feature's rows), and, since sharding numbers embedding rows
// feature by feature, the reads follow memory order within each part. Embedding rows are
// prefetched kPrefetchFids fids ahead. The block's output rows are built in a staging buffer that
// stays in cache and then written with non-temporal stores, one contiguous copy per output. The
// op is bound by memory latency (a gather of embedding rows) and then by write bandwidth.
//
// Slices of one feature run together only when that keeps every ADDN region's terms in plan
// order (InitOrder); otherwise plan order is kept. Either way every output float gets the same
// terms in the same order as the Go oracle: the same bits for any thread count.
//
// Backward gives every embedding row to one thread and each thread adds, in plan order, the
// contributions to its rows: no locks, no atomics, and the same float result for any number of
// threads. For v3/v4 a thread owns the rows of a run of features when features' regions are
// disjoint (as sharding makes them; FeatureSplit checks), and walks only their fids; otherwise
// rows are owned by hash (Owner, v1/v2) or by whole part (v3/v4), and every thread walks every
// fid to find its own.
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
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
// The forward pass works on kBlockRows batch rows at a time (its staging buffer: a block of every
// output's rows, in L2) and prefetches embedding rows kPrefetchFids fids ahead.
constexpr int64_t kBlockRows = 64;
constexpr int64_t kPrefetchFids = 32;
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

// PartLimits fills lim[0 .. nparts] for a feature whose slices read max_end floats: lim[p] is the
// largest valid position in part p (-1: none, the part is too narrow or too small), and
// lim[nparts] = -1 catches part indices out of range. FidsInLimits and the exact checks in
// CheckFeatures agree on every fid.
void PartLimits(const std::vector<Part> &parts, int64_t max_end, int64_t *lim) {
  const size_t nparts = parts.size();
  for (size_t p = 0; p < nparts; ++p) {
    const Part &pt = parts[p];
    if ((pt.width >= 0 && max_end > pt.width) || max_end > pt.size) {
      lim[p] = -1;
    } else {
      lim[p] = pt.stride == 1 ? pt.size - max_end
                              : (pt.stride > 0 ? (pt.size - max_end) / pt.stride : INT64_MAX);
    }
  }
  lim[nparts] = -1;
}

// FidsInLimits reports whether fids [k0, k1) all address embedding rows inside their parts:
// branch-free, so that checking costs little next to reading the fids.
FEL_ALWAYS_INLINE bool FidsInLimits(const uint64_t *fid, int64_t k0, int64_t k1, const int64_t *lim,
                                    uint64_t nparts) {
  int64_t bad = 0;
  for (int64_t k = k0; k < k1; ++k) {
    const uint64_t part = fid[k] >> 32;
    const int64_t pos = static_cast<int64_t>(fid[k] & 0xffffffffu);
    bad |= static_cast<int64_t>(pos > lim[part < nparts ? part : nparts]);
  }
  return bad == 0;
}

// RowsValid is the fast check of feature rows [first, first + rows): true when every row's fid
// range is in bounds and, with check_fids, every fid's embedding row is inside its part. On false
// the caller runs the exact checks to report the first fault. Consecutive rows' fid ranges are
// adjacent, so the fids are checked as one range.
bool RowsValid(const fel_input *in, const std::vector<Part> &parts, int64_t max_end, int64_t first,
               int64_t rows, bool check_fids, std::vector<int64_t> *limit) {
  if (rows == 0) return true;
  const int64_t rows_total = in->num_feature_rows, num_fids = in->num_fids;
  const int32_t *fo = in->feature_offset;
  bool ok = true;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = first + r;
    const int64_t b = fo[row], end = row + 1 < rows_total ? fo[row + 1] : num_fids;
    ok &= b >= 0 && end >= b && end <= num_fids;
  }
  if (!ok || !check_fids) return ok;
  PartLimits(parts, max_end, limit->data());
  const int64_t k1 = first + rows < rows_total ? fo[first + rows] : num_fids;
  return FidsInLimits(in->fid_offset, fo[first], k1, limit->data(), parts.size());
}

// CheckFeatures checks where every feature's rows and fids are. Without check_fids, the fids of
// non-shared features are left to the forward pass, which checks each block's fids as it reads
// them; the first fault reported may then not be the first in order (the caller checks again).
int32_t CheckFeatures(const fel_plan *pl, const fel_input *in, const std::vector<Part> &parts,
                      bool check_fids, std::vector<FeatureRows> *features, fel_error *err) {
  const int64_t batch = in->batch_size, rows_total = in->num_feature_rows;
  const int64_t nparts = static_cast<int64_t>(parts.size());
  if (in->num_nfl < pl->num_features) {
    return Fail(err, FEL_ERR_NFL_LENGTH, in->num_nfl, pl->num_features);
  }
  features->assign(pl->num_features, FeatureRows{0, 0, 0});
  std::vector<int64_t> limit(nparts + 1);
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
    (*features)[f] = FeatureRows{first, 1, shared ? 1 : 0};
    if (RowsValid(in, parts, max_end, first, rows, check_fids || shared, &limit)) continue;
    // Something is wrong: find the first fault, in the order the checks are documented in.
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = first + r;
      int64_t b, end;
      FidRange(in, row, &b, &end);
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
  }
  return FEL_OK;
}

// PrepareImpl runs every check but, without check_fids, those of non-shared features' fids (see
// CheckFeatures). A fault it reports is the first in order either way.
int32_t PrepareImpl(const fel_plan *pl, const fel_input *in, bool need_embedding_data,
                    bool check_fids, Prepared *p, fel_error *err) {
  *err = fel_error{FEL_OK, 0, 0, 0};
  if (!pl || !in) return Fail(err, FEL_ERR_PLAN, FEL_PLAN_COUNTS);
  if (CheckPlan(pl, err)) return err->code;
  if (CheckInputPointers(in, need_embedding_data, err)) return err->code;
  p->parts.clear();
  if (BuildParts(pl, in, &p->parts, err)) return err->code;
  if (in->batch_size < 0) return Fail(err, FEL_ERR_BATCH_SIZE, in->batch_size);
  if (CheckFeatures(pl, in, p->parts, check_fids, &p->features, err) && !check_fids) {
    // The first fault in order may be a fid of an earlier feature.
    return CheckFeatures(pl, in, p->parts, true, &p->features, err);
  }
  return err->code;
}

// ---- compute ----

// The region copies are short (a slice's dims): written with vector registers where the target
// has them, because the compiler turns plain copy and zero loops into memcpy/memset calls, whose
// call overhead is larger than the copy.
inline void Zero(float *dst, int32_t n) {
  int32_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, _mm_setzero_ps());
#endif
  for (; i < n; ++i) dst[i] = 0.0f;
}
inline void Assign(float *__restrict dst, const float *__restrict src, int32_t n) {
  int32_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, _mm_loadu_ps(src + i));
#endif
  for (; i < n; ++i) dst[i] = src[i];
}
inline void Add(float *__restrict dst, const float *__restrict src, int32_t n) {
  for (int32_t i = 0; i < n; ++i) dst[i] += src[i];
}
// MEAN divides every term (the reference's order), not the sum: same rounding as the reference.
inline void AddMean(float *__restrict dst, const float *__restrict src, int32_t n, float count) {
  for (int32_t i = 0; i < n; ++i) dst[i] += src[i] / count;
}

// Reduce pools columns [c0, c0 + dims) of rows[0 .. n) into dst[0 .. dims): for every column, an
// accumulator starts from the first row's term (kFromFirst, n >= 1), from dst (kFromDst) or from
// zero (kFromZero), and adds the other rows' terms in row order; a term is the float, or with
// kMean the float divided by count (the reference divides every term). The additions are the
// oracle's, in the same order, so the result has the same bits; but the accumulators stay in
// registers across rows instead of dst being loaded and stored again for every row.
enum ReduceInit { kFromFirst, kFromDst, kFromZero };
template <ReduceInit kInit, bool kMean>
FEL_ALWAYS_INLINE void Reduce(float *__restrict dst, const float *const *rows, int64_t n, int32_t c0,
                              int32_t dims, float count) {
  int32_t i = 0;
  const int64_t k_first = kInit == kFromFirst ? 1 : 0;
#if defined(__SSE2__)
  const __m128 cnt = _mm_set1_ps(count);
  auto term = [&](const float *p) {
    const __m128 v = _mm_loadu_ps(p);
    return kMean ? _mm_div_ps(v, cnt) : v;
  };
  auto init = [&](int32_t j) {  // the accumulator of columns [j, j + 4)
    if (kInit == kFromFirst) return term(rows[0] + c0 + j);
    if (kInit == kFromDst) return _mm_loadu_ps(dst + j);
    return _mm_setzero_ps();
  };
  for (; i + 16 <= dims; i += 16) {
    __m128 a0 = init(i), a1 = init(i + 4), a2 = init(i + 8), a3 = init(i + 12);
    for (int64_t k = k_first; k < n; ++k) {
      const float *p = rows[k] + c0 + i;
      a0 = _mm_add_ps(a0, term(p));
      a1 = _mm_add_ps(a1, term(p + 4));
      a2 = _mm_add_ps(a2, term(p + 8));
      a3 = _mm_add_ps(a3, term(p + 12));
    }
    _mm_storeu_ps(dst + i, a0);
    _mm_storeu_ps(dst + i + 4, a1);
    _mm_storeu_ps(dst + i + 8, a2);
    _mm_storeu_ps(dst + i + 12, a3);
  }
  for (; i + 4 <= dims; i += 4) {
    __m128 a = init(i);
    for (int64_t k = k_first; k < n; ++k) a = _mm_add_ps(a, term(rows[k] + c0 + i));
    _mm_storeu_ps(dst + i, a);
  }
#endif
  for (; i < dims; ++i) {
    float a = kInit == kFromFirst ? (kMean ? rows[0][c0 + i] / count : rows[0][c0 + i])
                                  : (kInit == kFromDst ? dst[i] : 0.0f);
    for (int64_t k = k_first; k < n; ++k) a += kMean ? rows[k][c0 + i] / count : rows[k][c0 + i];
    dst[i] = a;
  }
}

// StreamCopy copies n floats, with non-temporal stores where the target has them: the layout is
// written once and read by the next op, not by this one, so reading its lines for ownership first
// would only add memory traffic. StreamFence orders those stores before the thread finishes.
inline void StreamCopy(float *__restrict dst, const float *__restrict src, int64_t n) {
#if defined(__SSE2__)
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i];
  for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
#else
  memcpy(dst, src, n * sizeof(float));
#endif
}

inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// SharedRows holds the embedding rows of the shared features' fids (their one feature row),
// decoded from fid_offset once and read by every batch row.
struct SharedRows {
  std::vector<const float *> rows;  // first float of each fid's embedding row, feature by feature
  std::vector<int64_t> begin;       // per shared feature: its first entry in rows (+ one end)
};

struct Kernel {
  const fel_plan *pl;
  const fel_input *in;
  const Prepared *prep;
  // The first float and the stride of every part, and (at index nparts) of a dummy part that a bad
  // part index is clamped to.
  std::vector<float *> part_ptr;
  std::vector<int64_t> part_stride;
  // slot[f]: -1 when no slice reads feature f or it is absent; else, for a shared feature, its
  // index in shared_features (and SharedRows), and 0 for the others.
  std::vector<int32_t> shared_features, slot;

  // order is the order the forward pass visits slices in: plan order, regrouped so that the
  // slices of one feature run one after the other (their embedding rows are then still in cache)
  // when that keeps every ADDN region's terms in plan order.
  std::vector<int32_t> order;
  // limits: PartLimits of every non-shared feature that slices read, nparts + 1 entries each, for
  // the forward pass's checks of the fids (Prepare left them out); fault: a check failed.
  std::vector<int64_t> limits;
  mutable std::atomic<bool> fault{false};

  void Init() {
    slot.assign(pl->num_features, -1);
    for (int32_t f = 0; f < pl->num_features; ++f) {
      const FeatureRows &fr = prep->features[f];
      if (pl->feature_max_end[f] == 0 || !fr.present) continue;
      slot[f] = 0;
      if (fr.shared) {
        slot[f] = static_cast<int32_t>(shared_features.size());
        shared_features.push_back(f);
      }
    }
  }

  void InitLimits() {
    const size_t n = prep->parts.size() + 1;
    limits.assign(n * pl->num_features, -1);
    for (int32_t f = 0; f < pl->num_features; ++f) {
      if (slot[f] >= 0 && !prep->features[f].shared) {
        PartLimits(prep->parts, pl->feature_max_end[f], &limits[n * f]);
      }
    }
  }

  void InitOrder() {
    const int32_t ns = pl->num_slices;
    order.resize(ns);
    for (int32_t s = 0; s < ns; ++s) order[s] = s;
    // rank: features numbered in order of their first slice.
    std::vector<int32_t> rank(pl->num_features, -1);
    int32_t next = 0;
    for (int32_t s = 0; s < ns; ++s) {
      int32_t &r = rank[pl->slices[s].feature];
      if (r < 0) r = next++;
    }
    // Regrouping reorders the terms of an ADDN region unless its slices come in rank order.
    std::vector<int32_t> last(pl->num_outputs, -1);
    for (int32_t s = 0; s < ns; ++s) {
      const fel_slice &sl = pl->slices[s];
      if (!sl.addn) continue;
      const int32_t r = rank[sl.feature];
      if (r < last[sl.output]) return;
      last[sl.output] = r;
    }
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return rank[pl->slices[a].feature] < rank[pl->slices[b].feature];
    });
  }

  const float *Row(uint64_t fo) const {
    return part_ptr[fo >> 32] + static_cast<int64_t>(fo & 0xffffffffu) * part_stride[fo >> 32];
  }

  SharedRows DecodeShared() const {
    SharedRows d;
    for (int32_t f : shared_features) {
      d.begin.push_back(static_cast<int64_t>(d.rows.size()));
      int64_t b, e;
      FidRange(in, prep->features[f].first, &b, &e);
      for (int64_t k = b; k < e; ++k) d.rows.push_back(Row(in->fid_offset[k]));
    }
    d.begin.push_back(static_cast<int64_t>(d.rows.size()));
    return d;
  }

  static void ZeroRegion(const fel_slice &s, float *dst) {
    if (s.pooling == FEL_FIRSTN) {
      for (int64_t k = 0; k < s.max_seq; ++k) Zero(dst + k * s.seq_stride, s.dims);
    } else {
      Zero(dst, s.dims);
    }
  }

  // SliceOut is a slice with its output resolved: the region of batch row r starts at
  // base + r * row_size.
  struct SliceOut {
    const fel_slice *sl;
    float *base;
    int64_t row_size;
  };

  // PoolOne writes (or, ADDN, adds) the pooled value of the embedding rows rows[0 .. n) into one
  // row's region of a slice: the reference's GatherEmb with init = true, the first term copied
  // and later ones added; FIRSTN copies the first max_seq and zeroes the other positions.
  FEL_ALWAYS_INLINE static void PoolOne(const fel_slice &sl, float *dst, const float *const *rows,
                                        int64_t n) {
    const int32_t c0 = sl.start;
    const float count = static_cast<float>(n);
    if (sl.addn) {
      const bool mean = sl.pooling == FEL_MEAN;
      if (sl.addn_first) {
        mean ? Reduce<kFromZero, true>(dst, rows, n, c0, sl.dims, count)
             : Reduce<kFromZero, false>(dst, rows, n, c0, sl.dims, count);
      } else {
        mean ? Reduce<kFromDst, true>(dst, rows, n, c0, sl.dims, count)
             : Reduce<kFromDst, false>(dst, rows, n, c0, sl.dims, count);
      }
      return;
    }
    switch (sl.pooling) {
      case FEL_SUM:
      case FEL_MEAN:
        if (n == 0) {
          Zero(dst, sl.dims);
        } else if (sl.pooling == FEL_SUM) {
          Reduce<kFromFirst, false>(dst, rows, n, c0, sl.dims, count);
        } else {
          Reduce<kFromFirst, true>(dst, rows, n, c0, sl.dims, count);
        }
        return;
      default: {  // FEL_FIRSTN
        const int64_t copied = std::min<int64_t>(n, sl.max_seq);
        for (int64_t k = 0; k < copied; ++k) Assign(dst + k * sl.seq_stride, rows[k] + c0, sl.dims);
        for (int64_t k = copied; k < sl.max_seq; ++k) Zero(dst + k * sl.seq_stride, sl.dims);
        return;
      }
    }
  }

  // PoolFeature runs the slices [g, g_end) of one non-shared feature over batch rows [b, e), row by
  // row: each embedding row is read once for all of them. The rows' fids are read straight from
  // fid_offset, where they are contiguous, and their embedding rows are prefetched kPrefetchFids
  // fids ahead: sharding numbers embedding rows feature by feature, so they are close to memory
  // order, but several parts interleave and the op is bound by memory latency.
  template <bool kUnitStride>
  bool PoolFeature(const SliceOut *g, const SliceOut *g_end, int32_t f, int64_t b, int64_t e,
                   std::vector<const float *> *rows) const {
    const FeatureRows &fr = prep->features[f];
    const int64_t width = pl->feature_max_end[f];
    const uint64_t *fo = in->fid_offset;
    const int32_t *feature_offset = in->feature_offset;
    const int64_t rows_total = in->num_feature_rows;
    float *const *pp = part_ptr.data();
    const int64_t *stride = part_stride.data();
    auto fid_end = [&](int64_t row) -> int64_t {
      return row + 1 < rows_total ? feature_offset[row + 1] : in->num_fids;
    };
    const int64_t k_end = fid_end(fr.first + e - 1);
    const uint64_t nparts = prep->parts.size();
    const int64_t *lim = &limits[(nparts + 1) * f];
    const int64_t bytes = width * static_cast<int64_t>(sizeof(float));
    // Every fid is checked when the prefetch reaches it, before any row reads it; a bad part index
    // prefetches a harmless dummy (part_ptr[nparts]). The prefetch also notes each fid's embedding
    // row in rows, where the pooling finds it (rows[k - k_begin] for fid k).
    const int64_t k_begin = feature_offset[fr.first + b];
    if (static_cast<int64_t>(rows->size()) < k_end - k_begin) rows->resize(k_end - k_begin);
    const float **at = rows->data();
    int64_t ahead = k_begin, bad = 0;
    for (int64_t r = b; r < e; ++r) {
      const int64_t row = fr.first + r;
      const int64_t k0 = feature_offset[row], k1 = fid_end(row);
      for (const int64_t stop = std::min(k_end, k1 + kPrefetchFids); ahead < stop; ++ahead) {
        const uint64_t id = fo[ahead];
        const uint64_t part = std::min(id >> 32, nparts);
        const int64_t pos = static_cast<int64_t>(id & 0xffffffffu);
        bad |= static_cast<int64_t>(pos > lim[part]);
        // Integer arithmetic: the address of a bad fid may be anywhere (prefetches do not fault).
        const uintptr_t p = reinterpret_cast<uintptr_t>(pp[part]) +
                            static_cast<uintptr_t>(kUnitStride ? pos : pos * stride[part]) * sizeof(float);
        // Every line the row touches, from the line holding its first float (a row that does not
        // start a line spans one more).
        for (uintptr_t q = p & ~uintptr_t{63}; q < p + bytes; q += 64) {
          __builtin_prefetch(reinterpret_cast<const char *>(q));
        }
        at[ahead - k_begin] = reinterpret_cast<const float *>(p);
      }
      if (bad) return false;
      for (const SliceOut *s = g; s != g_end; ++s) {
        PoolOne(*s->sl, s->base + (r - b) * s->row_size, at + (k0 - k_begin), k1 - k0);
      }
    }
    return true;
  }

  // ForwardRows runs blocks of batch rows [b, b + kBlockRows) for b taken from next, until the
  // batch is done: threads take blocks as they come free, so one that another process delays
  // holds up the pass by a block at most, not by half the batch. The batch is not empty.
  void ForwardRows(float *const *outputs, std::atomic<int64_t> *next) const {
    const int64_t batch = in->batch_size;
    // A share claimed after the others took every block (a late worker's, run by the caller)
    // has nothing to set up for.
    if (next->load(std::memory_order_relaxed) >= batch) return;
    const int32_t ns = pl->num_slices;
    const SharedRows shared = DecodeShared();
    // The pooled value of every slice of a shared feature (the same for every batch row),
    // computed once per thread as a region of its own (FIRSTN positions packed, dims apart), and
    // copied, or added (ADDN), into each row below.
    std::vector<int64_t> tmp_at(ns, -1);
    int64_t tmp_size = 0;
    for (int32_t s = 0; s < ns; ++s) {
      const fel_slice &sl = pl->slices[s];
      const FeatureRows &fr = prep->features[sl.feature];
      if (fr.present && fr.shared) {
        tmp_at[s] = tmp_size;
        tmp_size += !sl.addn && sl.pooling == FEL_FIRSTN ? sl.max_seq * sl.dims : sl.dims;
      }
    }
    std::vector<float> tmp(tmp_size);
    for (int32_t s = 0; s < ns; ++s) {
      if (tmp_at[s] < 0) continue;
      const fel_slice &sl = pl->slices[s];
      const int64_t i = slot[sl.feature];
      fel_slice pooled = sl;
      pooled.addn = 0;
      pooled.seq_stride = sl.dims;
      PoolOne(pooled, tmp.data() + tmp_at[s], shared.rows.data() + shared.begin[i],
              shared.begin[i + 1] - shared.begin[i]);
    }
    bool unit_stride = true;
    for (const Part &pt : prep->parts) unit_stride = unit_stride && pt.stride == 1;
    std::vector<SliceOut> outs(ns);
    std::vector<const float *> rows;  // PoolFeature: the embedding rows of its fids
    std::vector<std::vector<float>> stage(pl->num_outputs);
    for (int32_t o = 0; o < pl->num_outputs; ++o) stage[o].resize(kBlockRows * pl->output_row_size[o]);
    for (int32_t i = 0; i < ns; ++i) {
      const fel_slice &sl = pl->slices[order[i]];
      outs[i] = SliceOut{&sl, stage[sl.output].data() + sl.offset, pl->output_row_size[sl.output]};
    }
    // A block of batch rows at a time, feature by feature (order groups the slices of a feature)
    // within the block: every output float still gets its terms in plan order; a feature's reads
    // follow fid_offset and its embedding rows, and the block's output rows stay in cache.
    for (int64_t b; (b = next->fetch_add(kBlockRows, std::memory_order_relaxed)) < batch;) {
      if (fault.load(std::memory_order_relaxed)) return;  // another thread found bad input
      const int64_t e = std::min(batch, b + kBlockRows);
      for (int32_t i = 0; i < ns;) {
        const int32_t f = outs[i].sl->feature;
        int32_t j = i + 1;
        while (j < ns && outs[j].sl->feature == f) ++j;
        const FeatureRows &fr = prep->features[f];
        if (fr.present && !fr.shared) {
          const bool ok = unit_stride ? PoolFeature<true>(&outs[i], &outs[j], f, b, e, &rows)
                                      : PoolFeature<false>(&outs[i], &outs[j], f, b, e, &rows);
          if (!ok) {
            fault.store(true, std::memory_order_relaxed);
            return;
          }
          i = j;
          continue;
        }
        for (; i < j; ++i) {
          const fel_slice &sl = *outs[i].sl;
          const int32_t s = order[i];
          for (int64_t r = b; r < e; ++r) {
            float *dst = outs[i].base + (r - b) * outs[i].row_size;
            if (!fr.present) {
              if (sl.addn) {
                if (sl.addn_first) Zero(dst, sl.dims);
              } else {
                ZeroRegion(sl, dst);
              }
              continue;
            }
            const float *t = tmp.data() + tmp_at[s];
            if (sl.addn) {
              if (sl.addn_first) {
                Assign(dst, t, sl.dims);
              } else {
                Add(dst, t, sl.dims);
              }
            } else if (sl.pooling == FEL_FIRSTN) {
              for (int64_t k = 0; k < sl.max_seq; ++k) Assign(dst + k * sl.seq_stride, t + k * sl.dims, sl.dims);
            } else {
              Assign(dst, t, sl.dims);
            }
          }
        }
      }
      for (int32_t o = 0; o < pl->num_outputs; ++o) {
        const int64_t n = (e - b) * pl->output_row_size[o];
        float *out = outputs[o] + b * pl->output_row_size[o];
        StreamCopy(out, stage[o].data(), n);
      }
    }
    StreamFence();
  }

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
  //
  // With `features` (v3/v4, FeatureSplit), the thread owns the embedding rows of those features
  // (their regions are disjoint) and runs with threads = 1 over their slices only.
  void BackwardOwned(const float *const *grads, int32_t self, int32_t threads,
                     const std::vector<char> *features = nullptr) const {
    const int64_t batch = in->batch_size;
    const bool by_part = pl->version >= 3;
    const uint64_t *fo = in->fid_offset;
    // v3/v4: which parts this thread owns (fid parts are validated), looked up per fid.
    std::vector<char> own_part(by_part ? prep->parts.size() : 0);
    for (size_t p = 0; p < own_part.size(); ++p) own_part[p] = static_cast<int32_t>(p % threads) == self;
    auto mine = [&](uint64_t f) {
      if (threads == 1) return true;
      return by_part ? own_part[f >> 32] != 0 : Owner(f, threads) == self;
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
      if (!fr.present || (features && !(*features)[sl.feature])) continue;
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
          float *dst = const_cast<float *>(Row(fo[k])) + sl.start;
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

// FeatureSplit gives each of n threads a run of features (by number of fids) for a v3/v4 backward
// pass, when no two features' fids touch overlapping floats of a part: then each embedding
// gradient float gets terms from one feature's slices only, and a thread walks only its features'
// fids instead of every fid (as the split by parts must). Returns false when regions overlap
// (malformed or hand-made offsets), or the split is not worth it.
bool FeatureSplit(const fel_plan *pl, const fel_input *in, const Prepared &p, int32_t n,
                  std::vector<std::vector<char>> *mine) {
  const int64_t nparts = static_cast<int64_t>(p.parts.size());
  struct Region {
    int64_t lo, hi;
    int32_t feature;
  };
  std::vector<std::vector<Region>> regions(nparts);
  std::vector<int64_t> fids(pl->num_features, 0);
  std::vector<int64_t> lo(nparts), hi(nparts);
  int64_t total = 0;
  for (int32_t f = 0; f < pl->num_features; ++f) {
    const FeatureRows &fr = p.features[f];
    if (!fr.present || pl->feature_max_end[f] == 0) continue;
    const int64_t rows = fr.shared ? std::min<int64_t>(1, in->batch_size) : in->batch_size;
    if (rows == 0) continue;
    int64_t k0, k1, unused;
    FidRange(in, fr.first, &k0, &unused);
    FidRange(in, fr.first + rows - 1, &unused, &k1);
    std::fill(lo.begin(), lo.end(), INT64_MAX);
    std::fill(hi.begin(), hi.end(), -1);
    for (int64_t k = k0; k < k1; ++k) {  // validated: parts in range, rows inside them
      const uint64_t id = in->fid_offset[k];
      const int64_t part = static_cast<int64_t>(id >> 32), pos = static_cast<int64_t>(id & 0xffffffffu);
      lo[part] = std::min(lo[part], pos);
      hi[part] = std::max(hi[part], pos);
    }
    for (int64_t q = 0; q < nparts; ++q) {
      if (hi[q] >= 0) regions[q].push_back(Region{lo[q], hi[q] + pl->feature_max_end[f], f});
    }
    fids[f] = k1 - k0;
    total += k1 - k0;
  }
  for (auto &rs : regions) {
    std::sort(rs.begin(), rs.end(), [](const Region &a, const Region &b) { return a.lo < b.lo; });
    for (size_t i = 1; i < rs.size(); ++i) {
      if (rs[i].lo < rs[i - 1].hi) return false;
    }
  }
  mine->assign(n, std::vector<char>(pl->num_features, 0));
  int64_t seen = 0;
  for (int32_t f = 0; f < pl->num_features; ++f) {
    // Feature f goes to the thread whose share of all fids its middle falls in.
    const int64_t mid = seen + fids[f] / 2;
    const int32_t t = total > 0 ? static_cast<int32_t>(std::min<int64_t>(n - 1, mid * n / total)) : 0;
    (*mine)[t][f] = 1;
    seen += fids[f];
  }
  return true;
}

// Team is a set of worker threads that run shares of a job. A share goes to whichever thread
// claims it first: the caller runs share 0 and then claims the rest alongside the workers, so a
// call never waits for a worker that has not started yet (on this project's VM a thread woken on
// a vCPU that has been idle for a few milliseconds first runs 0.3-1.8 ms later, while the host
// wakes the halted vCPU: 10-40% of a forward pass). Between jobs a worker waits for the next one
// spinning for up to kSpin, yielding its vCPU to any other runnable thread as it spins, then
// sleeps: a team kept between calls finds its workers awake when calls come back to back, as
// TensorFlow's intra-op pool and OpenMP runtimes do.
class Team {
 public:
  Team() = default;
  Team(const Team &) = delete;
  Team &operator=(const Team &) = delete;
  ~Team() {
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
      gen_.fetch_add(1, std::memory_order_release);
    }
    start_.notify_all();
    for (auto &t : threads_) t.join();
  }

  // Grow starts workers until there are n (fewer if threads run out). Not while a job runs.
  // Workers block every signal (they inherit the mask), so that signals sent to the process go
  // to the Go runtime's threads and not to threads that outlive the call.
  void Grow(int32_t n) {
    if (workers() >= n) return;  // every call but the first: no signal-mask system calls
    sigset_t all, old;
    sigfillset(&all);
    const bool masked = pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
    try {
      // A new worker starts from the current generation, so that it joins the next job even if
      // that is posted before it first runs.
      const uint64_t gen = gen_.load(std::memory_order_relaxed);
      while (workers() < n) {
        threads_.emplace_back([this, gen] { Work(gen); });
#if defined(__linux__)
        pthread_setname_np(threads_.back().native_handle(), "fel-worker");  // top -H, perf, tests
#endif
      }
    } catch (...) {
      // Out of threads: the caller claims the shares no worker takes.
    }
    if (masked) pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  // Wake makes sleeping workers spin again, so that a job posted soon finds them awake.
  void Wake() {
    {
      std::lock_guard<std::mutex> l(mu_);
      poke_.fetch_add(1, std::memory_order_relaxed);
    }
    start_.notify_all();
  }

  // Run runs job(0) .. job(n - 1), n <= kMaxShares, and returns when all are done.
  void Run(int32_t n, const std::function<void(int32_t)> &job) {
    if (n <= 1 || threads_.empty()) {
      for (int32_t i = 0; i < n; ++i) job(i);
      return;
    }
    uint64_t gen;
    {
      std::lock_guard<std::mutex> l(mu_);
      job_ = &job;
      shares_ = n;
      finished_.store(0, std::memory_order_relaxed);
      gen = gen_.fetch_add(1, std::memory_order_relaxed) + 1;
      claim_.store(gen << kShareBits | 1, std::memory_order_release);
    }
    start_.notify_all();
    job(0);
    RunShares(gen, n, job);
    // Every share is claimed: wait for those that workers run.
    Await([&] { return finished_.load(std::memory_order_acquire) == n - 1; }, &done_, nullptr);
  }

  static constexpr int kShareBits = 16;
  static constexpr int32_t kMaxShares = (1 << kShareBits) - 1;  // the claim counter reaches n

 private:
  static constexpr std::chrono::microseconds kSpin{200};

  int32_t workers() const { return static_cast<int32_t>(threads_.size()); }

  // RunShares claims and runs shares of job gen until none is left.
  void RunShares(uint64_t gen, int32_t n, const std::function<void(int32_t)> &job) {
    uint64_t cur = claim_.load(std::memory_order_acquire);
    for (;;) {
      const int32_t i = static_cast<int32_t>(cur & ((uint64_t{1} << kShareBits) - 1));
      if (cur >> kShareBits != gen || i >= n) return;
      if (!claim_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) continue;
      job(i);
      if (finished_.fetch_add(1, std::memory_order_acq_rel) == n - 2) {
        std::lock_guard<std::mutex> l(mu_);  // Await's sleeper checks under mu_: no lost wakeup
        done_.notify_all();
      }
      cur = claim_.load(std::memory_order_acquire);
    }
  }

  // Await returns true once ready() holds: it spins for up to kSpin, then sleeps on cv (whose
  // notifier changes the state under mu_) until ready() or, with poked, until *poked changes
  // (then it returns false: spin again).
  template <typename Ready>
  bool Await(const Ready &ready, std::condition_variable *cv, uint64_t *poked) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int spins = 1; !ready(); ++spins) {
#if defined(__SSE2__)
      _mm_pause();
#endif
      if ((spins & 63) == 0) {
        std::this_thread::yield();  // any other thread with work on this vCPU runs first
        if (std::chrono::steady_clock::now() > until) {
          std::unique_lock<std::mutex> l(mu_);
          if (!poked) {
            cv->wait(l, ready);
            return true;
          }
          const uint64_t seen = *poked;
          cv->wait(l, [&] { return ready() || poke_.load(std::memory_order_relaxed) != seen; });
          *poked = poke_.load(std::memory_order_relaxed);
          return ready();
        }
      }
    }
    return true;
  }

  void Work(uint64_t seen) {
    uint64_t poked = poke_.load(std::memory_order_relaxed);
    for (;;) {
      while (!Await([this, seen] { return gen_.load(std::memory_order_acquire) != seen; }, &start_,
                    &poked)) {
      }
      const std::function<void(int32_t)> *job;
      int32_t n;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (quit_) return;
        seen = gen_.load(std::memory_order_relaxed);
        job = job_;
        n = shares_;
      }
      // A claim names its job's generation, so a worker that wakes after its job ended claims
      // nothing of the next one.
      RunShares(seen, n, *job);
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<uint64_t> poke_{0};
  std::atomic<uint64_t> claim_{0};  // gen << kShareBits | the next share to claim
  std::atomic<int32_t> finished_{0};
  const std::function<void(int32_t)> *job_ = nullptr;  // guarded by mu_
  int32_t shares_ = 0;                                 // guarded by mu_
  bool quit_ = false;                                  // guarded by mu_
};

// The process's team, kept between calls (never destroyed: its workers sleep when unused), and
// the lock a call holds while it uses it. A team has at most kMaxWorkers workers; a call asking
// for more threads splits its work into that many shares all the same.
constexpr int32_t kMaxWorkers = 255;
std::mutex shared_team_mu;
Team *shared_team = nullptr;  // guarded by shared_team_mu

// Crew runs the shares fn(0) .. fn(n - 1) of one call's work on n threads: the caller's and the
// workers of the process's team, or, while another call holds that team, of a team of its own.
// It is made before the op's serial checks, so that waking the workers overlaps them. Run may be
// called more than once (the phases of the backward pass).
class Crew {
 public:
  explicit Crew(int32_t n)
      : n_(std::clamp<int32_t>(n, 1, Team::kMaxShares)), lock_(shared_team_mu, std::defer_lock) {
    if (n_ == 1) return;
    if (lock_.try_lock()) {
      try {
        if (!shared_team) shared_team = new Team;
        team_ = shared_team;
      } catch (const std::bad_alloc &) {
        lock_.unlock();
      }
    }
    if (!team_) {
      own_.reset(new Team);
      team_ = own_.get();
    }
    team_->Grow(std::min(n_ - 1, kMaxWorkers));
    team_->Wake();
  }
  Crew(const Crew &) = delete;
  Crew &operator=(const Crew &) = delete;

  int32_t size() const { return n_; }

  template <typename Fn>
  void Run(const Fn &fn) {
    if (!team_) {  // one thread
      fn(0);
      return;
    }
    team_->Run(n_, std::cref(fn));
  }

 private:
  const int32_t n_;
  std::unique_lock<std::mutex> lock_;
  std::unique_ptr<Team> own_;  // declared after lock_: stopped before the lock is released
  Team *team_ = nullptr;
};

float dummy_part[1];

void ResolveParts(const Prepared &p, const float *const *bases, std::vector<float *> *out,
                  std::vector<int64_t> *stride) {
  out->resize(p.parts.size() + 1);
  stride->resize(p.parts.size() + 1);
  for (size_t i = 0; i < p.parts.size(); ++i) {
    const Part &pt = p.parts[i];
    // An empty embedding may have no storage; nothing is read from an empty part.
    (*out)[i] = bases[pt.emb] ? const_cast<float *>(bases[pt.emb]) + pt.offset : nullptr;
    (*stride)[i] = pt.stride;
  }
  out->back() = dummy_part;
  stride->back() = 0;
}

}  // namespace

int32_t Prepare(const fel_plan *plan, const fel_input *in, Prepared *p, fel_error *err) {
  return PrepareImpl(plan, in, false, true, p, err);
}

int32_t CheckTensors(const fel_plan *pl, int64_t batch, const void *const *ptrs,
                     const int64_t *sizes, int32_t n, fel_error *err, bool need_ptrs) {
  if (n != pl->num_outputs) return Fail(err, FEL_ERR_OUTPUT_COUNT, n, pl->num_outputs);
  if (n > 0 && ((need_ptrs && !ptrs) || !sizes)) return Fail(err, FEL_ERR_INPUT, FEL_INPUT_OUTPUTS, -1);
  for (int32_t i = 0; i < n; ++i) {
    const int64_t row = pl->output_row_size[i];
    if (row > 0 && batch > INT64_MAX / row) return Fail(err, FEL_ERR_OUTPUT_SIZE, i, sizes[i], -1);
    const int64_t want = batch * row;
    if (sizes[i] != want) return Fail(err, FEL_ERR_OUTPUT_SIZE, i, sizes[i], want);
    if (need_ptrs && want > 0 && !ptrs[i]) return Fail(err, FEL_ERR_INPUT, FEL_INPUT_OUTPUTS, i);
  }
  return FEL_OK;
}

}  // namespace fel

extern "C" {

int32_t fel_validate(const fel_plan *plan, const fel_input *in, fel_error *err) {
  try {
    fel::Prepared p;
    return fel::Prepare(plan, in, &p, err);
  } catch (const std::bad_alloc &) {
    return fel::Fail(err, FEL_ERR_RESOURCE, 0);
  }
}

int32_t fel_forward(const fel_plan *plan, const fel_input *in, float *const *outputs,
                    const int64_t *output_sizes, int32_t num_outputs, int32_t threads,
                    fel_error *err) {
  try {
    // The workers are woken first: their wake overlaps the checks (the batch size is only a
    // thread count until then).
    fel::Crew crew(static_cast<int32_t>(
        std::max<int64_t>(1, std::min<int64_t>(threads, in->batch_size / fel::kMinRowsPerThread))));
    fel::Prepared p;
    if (fel::PrepareImpl(plan, in, true, false, &p, err)) return err->code;
    if (fel::CheckTensors(plan, in->batch_size, reinterpret_cast<const void *const *>(outputs),
                          output_sizes, num_outputs, err)) {
      return err->code;
    }
    const int64_t batch = in->batch_size;
    // An empty batch has no output floats, and the rows of its shared features were not checked.
    if (batch == 0) return FEL_OK;
    fel::Kernel k{plan, in, &p};
    fel::ResolveParts(p, in->embeddings, &k.part_ptr, &k.part_stride);
    k.Init();
    k.InitOrder();
    k.InitLimits();
    std::atomic<int64_t> next{0};
    crew.Run([&](int32_t) { k.ForwardRows(outputs, &next); });
    if (k.fault.load()) {
      // Report the first fault in order, as validation would have.
      if (fel::CheckFeatures(plan, in, p.parts, true, &p.features, err)) return err->code;
      return fel::Fail(err, FEL_ERR_INPUT, FEL_INPUT_FID_OFFSET);  // unreachable: the checks agree
    }
    return FEL_OK;
  } catch (const std::bad_alloc &) {
    return fel::Fail(err, FEL_ERR_RESOURCE, 0);
  }
}

int32_t fel_backward(const fel_plan *plan, const fel_input *in, const float *const *grads,
                     const int64_t *grad_sizes, int32_t num_grads, float *const *emb_grads,
                     int32_t threads, fel_error *err) {
  try {
    fel::Crew crew(static_cast<int32_t>(
        std::max<int64_t>(1, std::min<int64_t>(threads, in->num_fids / fel::kMinFidsPerThread))));
    fel::Prepared p;
    if (fel::PrepareImpl(plan, in, false, true, &p, err)) return err->code;
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
    fel::Kernel k{plan, in, &p};
    fel::ResolveParts(p, emb_grads, &k.part_ptr, &k.part_stride);
    k.Init();
    const int32_t n = crew.size();
    std::vector<std::vector<char>> by_feature;
    if (n > 1 && plan->version >= 3 && fel::FeatureSplit(plan, in, p, n, &by_feature)) {
      // Zero the gradients (a share of every tensor per thread), then add by feature.
      crew.Run([&](int32_t i) {
        for (int32_t e = 0; e < in->num_embeddings; ++e) {
          const int64_t size = in->embedding_sizes[e];
          const int64_t a = size * i / n, b = size * (i + 1) / n;
          if (b > a) memset(emb_grads[e] + a, 0, sizeof(float) * (b - a));
        }
      });
      crew.Run([&](int32_t i) { k.BackwardOwned(grads, 0, 1, &by_feature[i]); });
      return FEL_OK;
    }
    // Each thread zeroes the embedding rows it owns, then adds into them: its lines stay in its
    // cache, and no barrier separates the two.
    crew.Run([&](int32_t i) {
      k.ZeroOwned(emb_grads, i, n);
      k.BackwardOwned(grads, i, n);
    });
    return FEL_OK;
  } catch (const std::bad_alloc &) {
    return fel::Fail(err, FEL_ERR_RESOURCE, 0);
  }
}

}  // extern "C"
