/** \file pseudo_emitter.hpp
 *  `napkin emit --target pseudo`: looped pseudocode of a derived schedule in the manner of the
 *  paper's pseudocode diagrams (§5.1), rendering each kernel as lowering says it runs (its
 *  KernelSpec, lower/lower.hpp), as the CUDA emitter does:
 *  - a header: describe_spec's line; for gemm and flash the form's axes and tiles, per operand its
 *    tile and mover (cp.async and ldmatrix; TMA, multicast across a cluster), the mma.sync and
 *    wgmma instructions and warp roles; for rows and simt why no tensor-core strategy took it;
 *  - the loops of the strategy: gemm and flash: the grid over the form's tiles, the pipelined
 *    loop over K chunks (gemm: accumulators, epilogue) or over x chunks with the lemma's state
 *    update (flash: online softmax, or a plain sum); simt: one thread per element of each
 *    statement; rows: the schedule's grid and stream with each lemma's head, body and finalisation.
 *  Every buffer with its level, shape and size in bytes, each load and save. Deterministic
 *  (golden-tested: tests/golden/pseudo).
 */
#pragma once
#include <string>

#include "derive/derivation.hpp"

namespace napkin {

std::string emit_pseudo(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw);

}  // namespace napkin
