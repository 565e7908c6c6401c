/** \file input_scales.hpp
 *  The scale at which test inputs of a diagram are drawn so that a model of real shape stays
 *  well-conditioned (Kaiming-style initialisation, derived from the diagram alone).
 *
 *  Rule: an input that is an operand of a contraction one of whose other operands is computed
 *  inside the diagram (an activation times a weight) has fan-in = the product of the sizes of that
 *  contraction's contracted axes that the input carries, and is drawn with scale 1/sqrt(fan-in);
 *  activations then keep their magnitude through any depth. An input taking part in several such
 *  contractions takes the largest fan-in. Inputs contracted only with other inputs (a GEMM's A
 *  and B, attention's Q and K) and inputs never contracted keep scale 1. Calls are followed: a
 *  callee's input is computed when the caller passes a computed array, and is the caller's input
 *  when the caller passes one; the callee's contracted axes are written in the caller's axes by
 *  the call's binding (an axis the binding leaves to the callee is a literal, its size there).
 *  An operand is computed unless it is a reference to an input, an axis size or a number. A
 *  computed partner that is a softmax along a contracted axis sums to 1 there (an average, as
 *  attention's P in P V): it leaves the input's scale at 1.
 *
 *  Users: `napkin bench` (bench_spec.h's kInputScales, the harness's fill) and the torch module
 *  (INPUT_FAN_IN, INPUT_SCALES; kernels/reference/compare_torch.py generic), so both checks draw
 *  inputs at the same scales.
 */
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"

namespace napkin {

/** The fan-in of one input of the diagram and the scale it implies. */
struct InputScale {
  std::string input;                ///< the input's name
  std::int64_t fan_in = 1;          ///< 1: not contracted with a computed array (scale 1)
  std::vector<SizeFactor> factors;  ///< fan_in as a product of the diagram's axes (axis) and literals; empty for 1
  /** 1/sqrt(fan_in). */
  double scale() const;
};

/** The scale of every input of `d` (verified, in `p`) at `sizes` (every axis of `d`), in the order
 *  of d.inputs(). Raises UserError when a callee's sizes do not resolve (as the evaluator does). */
std::vector<InputScale> input_scales(const Program& p, const Diagram& d, const SizeMap& sizes);

/** One line for users: "Wq 1/sqrt(4096), W2 1/sqrt(14336); X, norm1 1" (the scaled inputs with
 *  their fan-in, then those at scale 1), or "all 1". */
std::string describe_input_scales(const std::vector<InputScale>& scales);

}  // namespace napkin
