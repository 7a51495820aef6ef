// Fused embedding-to-layout kernels: the C ABI shared by the CPU kernel (layout_cpu.cc), the CUDA
// kernel (layout.cu) and their callers (pkg/layout via cgo, the C++ tests).
//
// The op gathers the embeddings of the fids of every (feature, example) and pools them into the
// output ("layout") tensors described by a FeatureConfigs proto; the backward op scatters layout
// gradients back into embedding gradients. It is a port of Monolith's MonolithEmbeddingToLayout
// (versions 1-4) and MonolithEmbeddingToLayoutGrad ops. pkg/layout compiles the FeatureConfigs into a
// fel_plan; this header documents the data contract precisely, since C++ callers build plans too.
//
// Every entry point validates its whole input before touching any data and reports the first
// problem as a fel_error (code + three integers); it never reads or writes out of bounds, whatever
// the offsets say. Validation order is fixed (see fel_validate) so that every implementation reports
// the same first error for the same input.
#ifndef MONOLITH_NATIVE_LAYOUT_LAYOUT_H_
#define MONOLITH_NATIVE_LAYOUT_LAYOUT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Pooling of the fids of one (feature, example): values of monolith.io.proto.PoolingType.
enum {
  FEL_SUM = 0,
  FEL_MEAN = 1,
  FEL_FIRSTN = 3,
};

// The high bit of an nfl_offset entry marks a shared feature (one row for the whole batch).
#define FEL_SHARED_BIT 0x80000000u

// Error codes. a, b, c of fel_error carry the values named after each code.
enum {
  FEL_OK = 0,
  FEL_ERR_VERSION = 1,            // a: version (1-4 are supported)
  FEL_ERR_EMBEDDING_COUNT = 2,    // a: embeddings given, b: embeddings wanted
  FEL_ERR_EMBEDDING_DIMS = 3,     // (v1) a: dims given, b: embeddings given
  FEL_ERR_EMBEDDING_SHAPE = 4,    // (v1) a: embedding, b: its size, c: its row width
  FEL_ERR_ROW_SPLIT_COUNT = 5,    // (v2) a: row splits given, b: wanted
  FEL_ERR_ROW_SPLIT_LENGTH = 6,   // (v2) a: embedding, b: its row split length, c: wanted
  FEL_ERR_ROW_SPLIT_ORDER = 7,    // (v2) a: embedding, b: row split position, c: its value
  FEL_ERR_ROW_SPLIT_SIZE = 8,     // (v2) a: embedding, b: row split position, c: embedding size
  FEL_ERR_EMB_ROW_LENGTH_COUNT = 9,   // (v4) a: lengths given, b: wanted (tables * ps_num)
  FEL_ERR_EMB_ROW_LENGTH_VALUE = 10,  // (v4) a: position, b: its (negative) value
  FEL_ERR_EMB_ROW_LENGTH_SUM = 11,    // (v4) a: sum of lengths, b: embedding size
  FEL_ERR_BATCH_SIZE = 12,        // a: batch size
  FEL_ERR_OUTPUT_COUNT = 13,      // a: tensors given, b: wanted
  FEL_ERR_OUTPUT_SIZE = 14,       // a: tensor, b: its size, c: wanted (batch * row size; -1: overflow)
  FEL_ERR_NFL_LENGTH = 15,        // a: nfl_offset length, b: features
  FEL_ERR_NFL_ORDER = 16,         // a: feature, b: its (negative) number of feature rows
  FEL_ERR_FEATURE_ROWS = 17,      // a: feature, b: its feature rows, c: batch size
  FEL_ERR_FEATURE_RANGE = 18,     // a: feature, b: its first feature row, c: feature_offset length
  FEL_ERR_FID_RANGE = 19,         // a: feature row, b: its first fid, c: its end fid
  FEL_ERR_FID_PART = 20,          // a: fid position, b: its embedding part, c: parts
  FEL_ERR_FID_WIDTH = 21,         // a: fid position, b: its embedding part, c: the part's row width
  FEL_ERR_FID_OFFSET = 22,        // a: fid position, b: its offset in the part, c: the part's size
  FEL_ERR_PLAN = 23,              // a: what is wrong (FEL_PLAN_*), b, c: where
  FEL_ERR_INPUT = 24,             // a: which pointer is missing (FEL_INPUT_*), b: index
  FEL_ERR_RESOURCE = 25,          // a: 0 out of memory
  FEL_ERR_CUDA = 26,              // a: cudaError_t, b: step (FEL_CUDA_STEP_*)
};

// a of FEL_ERR_PLAN (b: table, slice or output; c: a value).
enum {
  FEL_PLAN_TABLES = 1,     // table_features is not a prefix count of num_features
  FEL_PLAN_DIMS = 2,       // a feature width is negative
  FEL_PLAN_FEATURE = 3,    // a slice reads a feature out of range
  FEL_PLAN_COLUMNS = 4,    // a slice's columns are empty, negative or beyond feature_max_end
  FEL_PLAN_POOLING = 5,    // unknown pooling, FIRSTN without positions, or FIRSTN in ADDN
  FEL_PLAN_OUTPUT = 6,     // a slice writes an output out of range
  FEL_PLAN_REGION = 7,     // a slice's region does not fit in the output row
  FEL_PLAN_PS_NUM = 8,     // v2, v4: ps_num is not positive
  FEL_PLAN_COUNTS = 9,     // negative counts or missing arrays
};

// a of FEL_ERR_INPUT.
enum {
  FEL_INPUT_EMBEDDINGS = 1,
  FEL_INPUT_ROW_SPLITS = 2,
  FEL_INPUT_EMB_ROW_LENGTHS = 3,
  FEL_INPUT_FID_OFFSET = 4,
  FEL_INPUT_FEATURE_OFFSET = 5,
  FEL_INPUT_NFL_OFFSET = 6,
  FEL_INPUT_OUTPUTS = 7,
  FEL_INPUT_BENCH = 8,  // fel_forward_cuda_bench: b iters (< 1) or c copy_bytes (< 0)
};

typedef struct {
  int32_t code;
  int64_t a, b, c;
} fel_error;

// One out slice: columns [start, start+dims) of the embedding of every fid of feature `feature`,
// pooled into a region of every row of output tensor `output`. Slices are evaluated in plan order
// (layouts sorted by name, slices in config order); the order fixes float rounding.
typedef struct {
  int32_t feature;     // sorted feature index: the feature's nfl_offset entry
  int32_t start;       // first embedding column
  int32_t dims;        // number of columns (> 0)
  int32_t pooling;     // FEL_SUM, FEL_MEAN or FEL_FIRSTN
  int32_t max_seq;     // FEL_FIRSTN: sequence positions written (> 0)
  int32_t output;      // output tensor
  int64_t offset;      // first float of the region in an output row
  int64_t seq_stride;  // FEL_FIRSTN: floats between two sequence positions in an output row
  int32_t addn;        // 1: the slices of this layout are summed into one region (OutType ADDN)
  int32_t addn_first;  // 1: the first slice of an ADDN layout
} fel_slice;

typedef struct {
  int32_t version;  // 1-4, the reference op's version
  int32_t ps_num;   // parameter servers (v2, v4)
  int32_t num_features;
  int32_t num_tables;
  // Features of table t (tables sorted by name, features by name within a table) are
  // table_feature_dims[table_features[t] .. table_features[t+1]): their embedding widths (v2).
  const int32_t *table_features;      // num_tables + 1 entries
  const int32_t *table_feature_dims;  // num_features entries
  // Per sorted feature: the largest slice end among the slices reading it; 0 when none does.
  const int32_t *feature_max_end;     // num_features entries
  int32_t num_slices;
  const fel_slice *slices;
  int32_t num_outputs;
  const int64_t *output_row_size;  // floats per batch row of each output tensor
} fel_plan;

// The op's inputs, as in the reference (names in brackets).
typedef struct {
  // [embeddings_list] v1: [rows, dim] per (table, ps); v2: flat per (table, ps), features
  // concatenated; v3: flat per (table, ps); v4: one tensor, (ps, table) parts concatenated.
  int32_t num_embeddings;
  const float *const *embeddings;
  const int64_t *embedding_sizes;  // floats
  const int64_t *embedding_dims;   // v1: row width of each embedding
  // [fid_list_row_split] v2: per embedding, prefix fid counts of its features (features + 1).
  int32_t num_row_splits;
  const int64_t *const *row_splits;
  const int64_t *row_split_sizes;
  // [fid_list_emb_row_lenth] v4: floats of each (ps, table) part of embeddings[0].
  int64_t num_emb_row_lengths;
  const int32_t *emb_row_lengths;
  // [fid_offset] part << 32 | position: the row (v1, v2) or float offset (v3, v4) in the part.
  const uint64_t *fid_offset;
  int64_t num_fids;
  // [feature_offset] first fid of every feature row; a row ends where the next begins.
  const int32_t *feature_offset;
  int64_t num_feature_rows;
  // [nfl_offset] first feature row of every feature (| FEL_SHARED_BIT when shared).
  const uint32_t *nfl_offset;
  int64_t num_nfl;
  int64_t batch_size;
} fel_input;

// fel_validate checks plan and input and fills err with the first problem, in this order:
// plan; version-specific embedding inputs (v1 dims/shapes, v2 row splits, v4 row lengths);
// batch size; then, feature by feature (sorted, only features that a slice reads): its nfl entry,
// its feature rows, and every fid of those rows against the embedding parts. Returns err->code.
int32_t fel_validate(const fel_plan *plan, const fel_input *in, fel_error *err);

// fel_forward computes the layout tensors into outputs[i] (output_sizes[i] floats each, batch_size *
// output_row_size[i] wanted); every output float is written. threads >= 1 splits the batch.
// Errors are fel_validate's (the first problem in its order); the fids of non-shared features
// are checked as they are read, so after an error some output rows may have been written.
int32_t fel_forward(const fel_plan *plan, const fel_input *in, float *const *outputs,
                    const int64_t *output_sizes, int32_t num_outputs, int32_t threads,
                    fel_error *err);

// Threads: fel_forward and fel_backward run on the calling thread and on the workers of a team
// of threads the library keeps between calls (started on first use, grown to the largest thread
// count asked for, at most 255; after a call its workers spin up to 200 us for the next one,
// then sleep). A call made while another call holds that team starts workers of its own. The
// workers are named "fel-worker" and block every signal: signals sent to the process go to its
// other threads.

// fel_backward computes the embedding gradients emb_grads[i] (embedding_sizes[i] floats each) from
// the layout gradients grads[i] (shaped like the outputs). Contributions to one embedding float are
// added in plan order (slice, then batch row, then fid), whatever the number of threads.
int32_t fel_backward(const fel_plan *plan, const fel_input *in, const float *const *grads,
                     const int64_t *grad_sizes, int32_t num_grads, float *const *emb_grads,
                     int32_t threads, fel_error *err);

// The CUDA kernel (layout.cu, built only with a CUDA toolchain) has the same contract on host
// pointers: it validates on the host, copies to the device, runs, copies back. Forward results
// equal fel_forward's; backward uses atomics, so sums may round differently.
// A CUDA failure is FEL_ERR_CUDA with the cudaError_t in a and the step that failed in b.
int32_t fel_forward_cuda(const fel_plan *plan, const fel_input *in, float *const *outputs,
                         const int64_t *output_sizes, int32_t num_outputs, fel_error *err);
int32_t fel_backward_cuda(const fel_plan *plan, const fel_input *in, const float *const *grads,
                          const int64_t *grad_sizes, int32_t num_grads, float *const *emb_grads,
                          fel_error *err);

// b of FEL_ERR_CUDA: what the CUDA call was doing.
enum {
  FEL_CUDA_STEP_DEVICE = 1,   // finding a device (no device, no driver, driver too old)
  FEL_CUDA_STEP_TABLES = 2,   // copying the plan and the offsets to the device
  FEL_CUDA_STEP_INPUT = 3,    // copying the embeddings (forward) or layout gradients (backward)
  FEL_CUDA_STEP_RESULT = 4,   // allocating (backward: and clearing) the results on the device
  FEL_CUDA_STEP_LAUNCH = 5,   // launching the kernel
  FEL_CUDA_STEP_RUN = 6,      // running the kernel
  FEL_CUDA_STEP_COPY_BACK = 7,  // copying the results back to the host
  FEL_CUDA_STEP_TIMING = 8,   // fel_forward_cuda_bench: the timing events and the memcpy
};

// fel_cuda_devices sets *count to the number of CUDA devices. With no device or no usable driver
// it returns FEL_ERR_CUDA (step FEL_CUDA_STEP_DEVICE) and the runtime's error in err->a
// (cudaErrorNoDevice when the runtime finds none).
int32_t fel_cuda_devices(int32_t *count, fel_error *err);

// fel_cuda_error_string writes the CUDA runtime's name and description of error code into
// buf[0 .. n), NUL-terminated and cut short if need be.
void fel_cuda_error_string(int32_t code, char *buf, int32_t n);

// fel_forward_cuda_bench times the forward kernel alone: it validates and copies the inputs once,
// runs the kernel iters times between CUDA events, and sets *kernel_ms to the mean time of one
// run; then it times iters device-to-device copies of copy_bytes bytes (the device's own copy
// limit, to compare with) and sets *copy_ms likewise. Nothing is copied back.
int32_t fel_forward_cuda_bench(const fel_plan *plan, const fel_input *in,
                               const int64_t *output_sizes, int32_t num_outputs, int32_t iters,
                               int64_t copy_bytes, double *kernel_ms, double *copy_ms,
                               fel_error *err);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // MONOLITH_NATIVE_LAYOUT_LAYOUT_H_
