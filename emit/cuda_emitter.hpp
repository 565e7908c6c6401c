/** \file cuda_emitter.hpp
 *  `napkin emit --target cuda`: the derived (or given) schedule as a .cu file. Each schedule
 *  kernel is generated from the labelled diagram by the first strategy of emit/cuda/strategies.hpp
 *  that covers it (gemm and flash on mma.sync tensor cores, rows for normalisers, simt otherwise);
 *  group partitions become the grid and the warps, the stream partition the main loop with the
 *  lemma's accumulators in registers, level labels the buffers (SMEM tiles, register fragments).
 *  A statement calling another diagram runs the callee's own kernels (emit/cuda/call.cpp): one
 *  schedule kernel of the caller, strategy "call".
 *
 *  C entry points of the emitted file (every pointer a device pointer; arrays row-major in their
 *  declared axis order, stored in their dtype; inputs and outputs in the diagram's order; sizes
 *  in elements, in axis declaration order; 0 on success, else see <prefix>last_error()):
 *      int    <prefix>kernel_count(void);
 *      const char* <prefix>kernel_name(int k);     // schedule kernel k ("S_to_O")
 *      const char* <prefix>kernel_strategy(int k); // "gemm", "flash", "rows", "simt"
 *      size_t <prefix>workspace_bytes(const int64_t* sizes);  // intermediates kept in HBM
 *      int    <prefix>run_kernel(int k, const void* const* inputs, void* const* outputs,
 *                                const int64_t* sizes, void* workspace, cudaStream_t stream);
 *      int    <prefix>run(const void* const* inputs, void* const* outputs, const int64_t* sizes,
 *                         void* workspace, cudaStream_t stream);  // every kernel in order
 *      const char* <prefix>last_error(void);
 *  Kernels launch asynchronously on `stream`; launch errors are returned, execution errors
 *  surface at the caller's next synchronisation.
 */
#pragma once
#include <string>

#include "derive/derivation.hpp"
#include "emit/cuda/context.hpp"
#include "hardware/hardware.hpp"

namespace napkin {

/** The .cu text for `d` scheduled as `dv` on `hw` (its [[mma]] table and SMEM limit; `d` as given
 *  to derive: where derive rewrote it, dv.diagram(d) is what is emitted). Raises
 *  UserError for dtypes the emitter cannot store and for call arguments the call strategy cannot
 *  pass (emit/cuda/strategies.hpp, emit_call). */
std::string emit_cuda(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw,
                      const cuda::EmitOptions& opt = {});

}  // namespace napkin
