/** \file pipeline.cuh
 *  The stage ring of a software pipeline: chunk `it` of a stream goes to stage it % STAGES, on the
 *  ring's (it / STAGES)-th pass; barriers that complete once per pass (the mbarriers of sync.cuh)
 *  are waited for by the parity of that pass. cp.async rings use the stage alone.
 */
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace napkin {

/** Position of a stream of chunks in a ring of STAGES buffers; `it` counts the chunks passed. */
template <int STAGES> struct StageRing {
  static_assert(STAGES >= 1, "a ring has a stage");
  int64_t it = 0;
  /** The buffer of the current chunk. */
  __host__ __device__ __forceinline__ int stage() const { return static_cast<int>(it % STAGES); }
  /** Parity of the current pass: what a consumer waits for on the stage's `full` barrier. */
  __host__ __device__ __forceinline__ unsigned phase() const { return static_cast<unsigned>((it / STAGES) & 1); }
  /** True when the stage held an earlier chunk: the producer waits for its release first. */
  __host__ __device__ __forceinline__ bool reuses() const { return it >= STAGES; }
  /** Parity of the pass whose release the producer waits for on the stage's `empty` barrier. */
  __host__ __device__ __forceinline__ unsigned release_phase() const { return static_cast<unsigned>((it / STAGES - 1) & 1); }
  __host__ __device__ __forceinline__ void advance() { ++it; }
};

}  // namespace napkin
