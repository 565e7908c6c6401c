/** \file divisibility.hpp
 *  Pass derive-divisibility: the hardware's divisibility constraints on tile sizes, combined per
 *  axis by least common multiple, each with its reason (paper §5.2: coalescing and tensor-core
 *  shapes as superscripts on axis sizes).
 *  - Coalescing: a partitioned innermost axis of an HBM array moves in 128-byte segments: a
 *    multiple of 128 / (bytes per element) elements; not for an array whose axes another HBM
 *    array of the kernel carries with more and a different innermost axis (a row statistic beside
 *    its rows: a fraction of their bytes, which cannot bound the kernel even uncoalesced).
 *  - MMA (PTX ISA 9.7.14, mma.sync m16n8k16 for bf16/fp16): in a tensor-core contraction, the
 *    rows of the first operand are a multiple of m per warp (times the warps that split them), the
 *    columns of the second a multiple of n, the contracted axis a multiple of k.
 *  Contract: reads the kernel's statements, the hardware's MMA table and the warps; does not
 *  change the schedule. Axes absent from the result have no constraint (multiple of 1).
 */
#pragma once
#include <map>
#include <string>
#include <vector>

#include "diagrams/weave.hpp"
#include "perfmodel/cost.hpp"

namespace napkin {

struct Divisibility {
  std::int64_t lcm = 1;
  std::vector<std::string> reasons;
};

/** Constraints for the axes of a kernel made of `stmts`, whose tiles of the first grouped axis are
 *  split over `warps` warps along `warp_axis` (empty: none). */
/** `hbm_arrays` are the kernel's inputs and outputs (the arrays that cross HBM). */
std::map<std::string, Divisibility> divisibility(const Program& p, const Diagram& d,
                                                 const std::vector<const StatementWeave*>& stmts,
                                                 const std::vector<std::string>& hbm_arrays, const Hardware& hw,
                                                 const ModelOptions& opt, int warps, const std::string& warp_axis);

}  // namespace napkin
