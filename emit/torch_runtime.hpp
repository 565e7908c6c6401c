/** \file torch_runtime.hpp
 *  The helpers every module written by `napkin emit --target torch` starts with (Python text):
 *  dtype rounding with the semantics of diagrams/dtype.hpp, size resolution with the rules of
 *  diagrams/sizes.hpp, einsum with operand promotion, causal masks, layer and RMS norms over any
 *  axis, call results woven over the caller's extra axes, and IEEE scalar maths (Python's math
 *  raises where the evaluator gives inf or NaN). emit/torch_emitter.cpp documents the contract
 *  of the module that uses them. The Python lives in emit/torch_runtime.py, embedded by CMake
 *  (emit/CMakeLists.txt) as a string literal.
 */
#pragma once
#include <string_view>

namespace napkin {

/** Python source of the helpers (imports included), ending with a blank line. */
std::string_view torch_runtime();

}  // namespace napkin
