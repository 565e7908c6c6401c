/** \file lift.hpp
 *  Lifting a callee over a call's woven axes (a vmap). A call `Y[w.., o..] = D(A1, ..; k=a)` is
 *  mapped over its woven axes w (typing.hpp: the caller axes of its arguments that no callee axis
 *  binds). Its lift is D with those axes added, so that one run of the lifted diagram computes the
 *  whole call, the woven axes becoming batch axes of its kernels:
 *  - each woven axis is declared first, at the caller's size, under the caller's name, or under
 *    `<name>_<i>` (the first i = 1, 2, .. free) when D already uses that name for an axis or an array;
 *  - each input of D takes the woven axes its actual argument has, first, in woven order (a weight
 *    without `b` stays broadcast over `b`), then its own axes: the layout of the caller's argument
 *    with its bound axes renamed to D's;
 *  - each statement takes, first and in woven order, the woven axes of the arrays it reads
 *    (transitively): the axes its expression then has; a call inside D is lifted in turn when
 *    that callee is derived;
 *  - the output must then have every woven axis (the call's result has them all); a call whose
 *    output does not depend on a woven axis is a user error.
 *  The lifted diagram is named `<D>_over_<w>_..` (D's name when nothing is woven), keeps D's
 *  source locations (added axes are located at the call), prints as canonical text that parses to
 *  it, and passes verification as a parsed diagram does (verify.hpp); an expression that the lift
 *  leaves ill-typed, such as a mask lifted over `b` applied to an array without it, is a user
 *  error. The verifier lifts every call, so that these errors are located at the call.
 */
#pragma once
#include <map>
#include <string>
#include <vector>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

/** A callee lifted over a call's woven axes. */
struct LiftedCallee {
  Diagram diagram;  ///< the callee with the woven axes added (above)
  AxisList woven;   ///< the woven axes as named in `diagram`, in the call's woven order
  /** Caller axis of each axis of `diagram` that one binds: woven axes and bound callee axes.
   *  Axes absent here are sized by their declaration (products of other axes). */
  std::map<std::string, std::string> caller_axis;
};

/** Lifts `shape.callee` over `shape.woven` for the call `call` (an Op::call node of a verified
 *  diagram of `p`) whose arguments have the caller axes `arg_axes`; `caller_sizes` sizes every
 *  woven axis. Raises UserError, naming `statement` and the callee, when the lift is not well
 *  formed (see above). */
LiftedCallee lift_call(const Program& p, const Expr& call, const CallShape& shape, const std::vector<AxisList>& arg_axes,
                       const SizeMap& caller_sizes, const std::string& statement);

/** The caller axis of each axis of `lifted` that the call `shape` binds (woven axes, by position,
 *  and bound callee axes): `lifted.caller_axis` for the call it was made for, and right too for a
 *  call alike (same lifted diagram) whose callee axes bind other caller axes. */
std::map<std::string, std::string> caller_axes(const LiftedCallee& lifted, const CallShape& shape);

}  // namespace napkin
