// Package layout is the fused embedding-to-layout op of Monolith training
// (distribution_ops.fused_embedding_to_layout and its gradient; the reference kernels are
// MonolithEmbeddingToLayout, V2, V3 and V4 in monolith/native_training/runtime/ops).
//
// The op turns the embeddings looked up on the parameter servers into the model's input tensors
// ("layouts"). A FeatureConfigs proto names the features (embedding table, slice dims, pooling:
// SUM, MEAN or FIRSTN) and the layouts (OutConfig: slices of feature embeddings, out type NONE,
// CONCAT, STACK or ADDN, shapes as infer_shape writes them). For every (feature, example) the op
// pools the embeddings of the example's fids and writes each slice into its layout; the gradient op
// scatters layout gradients back onto the embeddings.
//
// The fids reach the op as offsets, produced by sharding_sparse_fids:
//
//	nfl_offset[f]      first feature row of feature f (sorted by name); the high bit marks a
//	                   shared feature (one row for the whole batch, ExampleBatch SHARED lists)
//	feature_offset[r]  first fid of feature row r (one row per example, or one if shared)
//	fid_offset[k]      part << 32 | position: which embedding block holds fid k and where
//
// The op version fixes how parts map onto the embeddings_list tensors (see Input).
//
// # Implementations
//
// Three implementations of the same contract are checked against each other:
//
//   - the Go oracle (oracle.go, Plan.ForwardOracle / BackwardOracle): a plain transcription of the
//     reference kernel, written for clarity;
//   - the C++ CPU kernel (native/layout/layout_cpu.cc, a cc_library called through cgo by
//     Plan.Forward / Backward): multi-threaded over the batch (forward) or over embedding rows
//     (backward), with results bit-for-bit equal to the oracle's for any number of threads;
//   - the CUDA kernel (native/layout/layout.cu): the CUDA engine, in binaries built with the cuda
//     tag after native/layout/build_cuda.sh (needs nvcc), or by Bazel's //pkg/layout:layout_cuda_test
//     (tag cudacdeps), or with the cudaemu tag, which compiles it as C++ and runs its kernels on the
//     CPU to check their logic (native/README.md). CUDADevices says whether a device can run it;
//     Plan.CUDAKernelTimes times the kernel alone, without host-device copies.
//
// Go slices reach the native kernel without copies (pinned with runtime.Pinner); one cgo call per
// op call. The C++ sources in this directory are symlinks into native/layout, so that the go tool
// compiles them (and notices when they change); Bazel links //native/layout:layout_cpu instead.
//
// # Better than the reference
//
// The reference CHECK-fails (aborts the process) or reads out of bounds on inconsistent offsets or
// shapes. Here every input is validated before any data is touched and the first problem comes back
// as an *InputError (errkind.Value), the same one from every implementation. FIRSTN slices in
// CONCAT and STACK layouts are laid out as their shapes say (the reference writes them as if they
// were NONE layouts). The gradient adds every contribution (versions 1 and 2 of the reference copy
// the first contribution per fid and slice instead, losing earlier ones when two slices of a
// feature overlap) and is deterministic: the same bits for any number of threads.
package layout
