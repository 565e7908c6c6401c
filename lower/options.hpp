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
  std::optional<DType> dtype;  ///< quantization: store every array in this dtype (compare --dtype)
  /** The paper's two-level model (§2.2): one lower level of capacity `two_level_capacity_bytes`
   *  holding every tile, accumulators included, one pipeline stage, no register file. */
  bool two_level = false;
  double two_level_capacity_bytes = 0;  ///< bytes
  int pipeline_stages = 2;     ///< cp.async stages the model assumes for streamed inputs of a kernel with no spec'd pipeline
};

/** Storage dtype of an array: its declared dtype, the override, or for undeclared intermediates
 *  the dtype of the diagram's first output. An int32 input (indices: gather targets) keeps int32
 *  under the override. */
DType storage_dtype(const Diagram& d, const std::string& array, const ModelOptions& opt);

/** `d` with every array declared in the dtype storage_dtype gives it under `opt`: inputs, outputs
 *  and the statements with a dtype label retyped (an unlabelled statement follows the first
 *  output, retyped too; no label is added, since a label also rounds the value where it is
 *  computed), so that code emitted from the copy (which reads the declared dtypes) stores what
 *  the model priced under opt.dtype (compare --dtype). Without opt.dtype the copy equals `d`. */
Diagram stored_as(const Diagram& d, const ModelOptions& opt);

}  // namespace napkin
