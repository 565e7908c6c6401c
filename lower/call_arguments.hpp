/** \file call_arguments.hpp
 *  The arguments of a call that its callee cannot read as they are, and the copies that make them
 *  readable: one decision, made here, that the model prices (derive/derivation.cpp, the call's
 *  kernel) and the CUDA call strategy renders (emit/cuda/call.cpp).
 *
 *  A call runs its callee lifted over the call's woven axes (diagrams/lift.hpp) on the caller's
 *  arrays, whole: the callee's input j reads its argument in place when the argument is an array
 *  laid out as the lifted formal (its woven axes first, in the call's woven order, then the callee's
 *  axes in the callee's order, renamed to the caller's) and stored in the formal's dtype. Any other
 *  argument, an expression, an array laid out otherwise (a transpose) or stored in another dtype,
 *  is first copied into a buffer `<S>__arg<j>` of that layout and dtype by a SIMT kernel (one
 *  thread per element, the argument's expression evaluated there and rounded to the dtype), which
 *  the callee then reads. The copy is priced as that SIMT kernel (perfmodel/simt_cost.hpp) and added
 *  to the call's kernel; `napkin derive` says so beside the call.
 */
#pragma once
#include <string>
#include <vector>

#include "diagrams/lift.hpp"
#include "lower/options.hpp"

namespace napkin {

/** One argument copied before the call (above). */
struct CallArgumentCopy {
  std::size_t index = 0;  ///< the argument's position, from 0
  std::string buffer;     ///< `<S>__arg<j>`, j = index + 1
  AxisList axes;          ///< the lifted formal's layout, in caller axes
  DType dtype = DType::fp32;  ///< the formal's storage dtype
  std::string reason;     ///< why: "an expression", "laid out as [..]", "stored as bf16, the callee reads fp32"
};

/** The copies the call `call` (a node of statement `s` of `caller`, of a program whose diagrams
 *  resolve it) needs, given its callee lifted for it (`lifted`, `shape`), in argument order; the
 *  dtypes under `opt` (lower/options.hpp storage_dtype). `arg_axes`: each argument's axes. */
std::vector<CallArgumentCopy> call_argument_copies(const Diagram& caller, const Statement& s, const Expr& call,
                                                   const std::vector<AxisList>& arg_axes, const LiftedCallee& lifted,
                                                   const CallShape& shape, const ModelOptions& opt);

/** `caller` with each copy of `copies` as a statement `buffer[axes] : dtype = argument`, before `s`:
 *  the diagram the copies are priced on as SIMT statements. */
Diagram with_argument_copies(const Diagram& caller, const Statement& s, const Expr& call, const std::vector<CallArgumentCopy>& copies);

}  // namespace napkin
