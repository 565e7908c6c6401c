/** \file torch_emitter.hpp
 *  `napkin emit --target torch`: a diagram as a Python module that computes it with PyTorch the way
 *  an eager PyTorch user writes it, the reference napkin's kernels are timed and checked against
 *  (kernels/reference/compare_torch.py generic). No schedule is involved: the module is the plain
 *  diagram.
 *
 *  The module defines, for the diagram D (the selected one):
 *      def D(inputs: dict[str, torch.Tensor], sizes: dict[str, int] | None = None, *,
 *            reference: bool = False) -> dict[str, torch.Tensor]
 *  inputs by name, each with its axes in declared order (AXES) and stored in its dtype (DTYPES:
 *  fp32, bf16 and fp16 as themselves, fp8 as torch.float8_*, int8 and int4 as torch.int8); axis
 *  sizes come from the input shapes, then `sizes`, then the declared sizes (a mismatch raises
 *  ValueError). It returns every output by name, stored in its dtype. `reference=True` computes
 *  everything in fp32 (inputs upcast, dtype labels rounding but keeping fp32) and returns the
 *  outputs in fp32, unrounded: the fp32 reference of the same computation. Module constants:
 *  AXES (array -> axis names, every input and statement), SIZES (axis -> size, declaration
 *  order, `--set` applied), DTYPES (inputs and outputs -> napkin dtype name), INPUTS and OUTPUTS
 *  (names in the diagram's order: the order of napkin's C entry points), DIAGRAM (D's name),
 *  INPUT_FAN_IN (input -> tuple of axis names and integers, the product its fan-in; empty: 1) and
 *  INPUT_SCALES (input -> 1/sqrt(fan-in) at SIZES): the scales test inputs are drawn at, the rule
 *  of diagrams/input_scales.hpp that napkin bench uses too.
 *
 *  Semantics follow the evaluator (diagrams/eval.hpp): axes are woven by name (operands aligned
 *  by permuting and inserting broadcast dimensions); contract is torch.einsum; softmax,
 *  layernorm and rmsnorm are torch.softmax, F.layer_norm and F.rms_norm along their axis; mask
 *  is masked_fill with -inf where the mask is 0; causal(q, x) is a lower-triangular mask; a
 *  statement's dtype label rounds to that dtype; calls are Python functions of the callee, woven
 *  over the caller's extra axes as leading batch dimensions. Intermediates without a label take
 *  torch's dtype (16-bit inputs give 16-bit intermediates with fp32 accumulation inside einsum,
 *  softmax and the norms, as in eager PyTorch). Where torch differs from the evaluator on NaN
 *  (max and relu propagate it; the evaluator's max skips it), torch's rule holds.
 *
 *  Errors: a contraction over more than 52 distinct axes (einsum's letters) is a located error;
 *  every other construct of the language emits.
 */
#pragma once
#include <string>

#include "diagrams/diagnostics.hpp"
#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"

namespace napkin {

/** The Python module for diagram `d` of `p` (verified), with SIZES = `sizes`. Reports a located
 *  error into `diags` for a contraction the einsum notation cannot write (the text returned is
 *  then not to be used). */
std::string emit_torch(const Program& p, const Diagram& d, const SizeMap& sizes, DiagnosticEngine& diags);

}  // namespace napkin
