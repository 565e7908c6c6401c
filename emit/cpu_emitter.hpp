/** \file cpu_emitter.hpp
 *  `napkin emit --target cpu`: the derived schedule as plain C++ that executes exactly the derived
 *  tiling and streaming: one loop nest per kernel over its grid (grouped axes, in declaration
 *  order), explicit loads of input tiles and saves of output tiles, and for a streamed axis the
 *  loop over chunks with the lemma's accumulators (head before the loop, body per chunk,
 *  finalisation after it). Sizes are runtime arguments; tile sizes are constants, those of the
 *  kernel's spec (lower/lower.hpp): the lowered grid, and a contracted axis the schedule keeps
 *  whole but lowering walks in chunks (gemm K by T_K, flash x by T_X) is walked in those chunks
 *  with the lemmas that fold it, as the CUDA kernel does; edge tiles are clipped (min), so sizes
 *  need not divide the tiles.
 *
 *  Entry point of the emitted code (all arrays row-major in their declared axis order, fp64):
 *      extern "C" void napkin_run(const double* const* inputs, double* const* outputs,
 *                                 const int64_t* sizes);
 *  inputs in the diagram's input order, outputs in its output order, sizes in axis declaration
 *  order. Calls of other diagrams become functions of their own, woven over the caller's extra
 *  axes. Tests compile it and compare with the fp64 evaluator (tests/emit/cpu_loop_nest_test.cpp).
 */
#pragma once
#include <map>
#include <string>

#include "derive/derivation.hpp"

namespace napkin {

/** C++ source for `d` scheduled as `dv` (its chosen schedule, lemmas and callee derivations; `d`
 *  as given to derive: where derive rewrote it, dv.diagram(d) is what is emitted).
 *  `prefix` names the entry point (`<prefix>run`). Raises InternalError for a schedule the
 *  checker would refuse. */
std::string emit_cpu(const Program& p, const Diagram& d, const Derivation& dv, const std::string& prefix = "napkin_");

}  // namespace napkin
