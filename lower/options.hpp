/** \file options.hpp
 *  Options shared by lowering and the performance model, and the storage dtype rule both apply.
 */
#pragma once
#include <optional>
#include <string>

#include "diagrams/ir.hpp"

namespace napkin {

/** Options of lowering and pricing (derive, compare). */
struct ModelOptions {
  /** Quantization (compare --dtype): the dtype arrays are stored in. A 16- or 32-bit override
   *  stores every array in it. An override of 8 bits or fewer (fp8e4m3, fp8e5m2, int8, int4) is
   *  the quantized rule of FP8/INT8 inference (operands in the low type with per-tensor scales,
   *  fp32 accumulation, outputs in bf16): inputs (and copies of them) in the low type, outputs and
   *  intermediate arrays in bf16. int32 inputs (indices) keep int32 either way. storage_dtype. */
  std::optional<DType> dtype;
  /** The paper's two-level model (§2.2): one lower level of capacity `two_level_capacity_bytes`
   *  holding every tile, accumulators included, one pipeline stage, no register file. */
  bool two_level = false;
  double two_level_capacity_bytes = 0;  ///< bytes
  int pipeline_stages = 2;     ///< cp.async stages the model assumes for streamed inputs of a kernel with no spec'd pipeline
};

/** Whether opt.dtype is a quantized override (8 bits or fewer): see ModelOptions::dtype. */
bool quantized_override(const ModelOptions& opt);

/** Storage dtype of an array. Without an override: its declared dtype, or for undeclared
 *  intermediates the dtype of the diagram's first output. Under a 16- or 32-bit override: the
 *  override. Under a quantized override (8 bits or fewer): the override for inputs and for a
 *  statement that copies an input unchanged (a relayout, `V_k[b,h,d,x] = V`: stored as the input),
 *  bf16 for outputs and every other statement. An int32 input (indices: gather targets) keeps
 *  int32 under any override. */
DType storage_dtype(const Diagram& d, const std::string& array, const ModelOptions& opt);

/** `d` with every array declared in the dtype storage_dtype gives it under `opt`: inputs, outputs
 *  and the statements with a dtype label retyped (an unlabelled statement follows the first
 *  output, retyped too; no label is added, since a label also rounds the value where it is
 *  computed), so that code emitted from the copy (which reads the declared dtypes) stores what
 *  the model priced under opt.dtype (compare --dtype). Without opt.dtype the copy equals `d`. */
Diagram stored_as(const Diagram& d, const ModelOptions& opt);

}  // namespace napkin
