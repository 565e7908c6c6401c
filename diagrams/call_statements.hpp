/** \file call_statements.hpp
 *  One call per statement: the form derive schedules calls in (a call kernel is one statement
 *  that calls one diagram; derive/derivation.cpp, emit/cuda/call.cpp).
 *
 *  In a statement that holds more than one call (`Z = f(A) + g(B)`), or a call inside another
 *  call's arguments (`Z = f(g(A))`), every call but the outermost last one becomes a statement of
 *  its own, innermost first: `<S>_call<k>` (the first k = 1, 2, .. whose name is free) with the
 *  call's axes in its result's order, and its place reads that statement. The meaning is unchanged
 *  (the same values, stored); a diagram whose statements hold one call at most comes back equal.
 */
#pragma once
#include "diagrams/program.hpp"

namespace napkin {

/** `d` (a verified diagram of `p`) with one call per statement at most (above); `changed` tells
 *  whether anything moved. */
Diagram one_call_per_statement(const Program& p, const Diagram& d, bool& changed);

}  // namespace napkin
