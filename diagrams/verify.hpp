/** \file verify.hpp
 *  Well-formedness of a loaded program. Reports every problem as a located diagnostic:
 *  - every name declared once per diagram (axes and arrays share one namespace), every diagram
 *    name once per program;
 *  - every axis of every array and operation declared; sizes resolve (sizes.hpp);
 *  - operations well-typed (typing.hpp): reduced axes present, masks and weights within their
 *    operand's axes, calls bound to existing axes;
 *  - each statement's declared axes are exactly the axes its expression produces (output axes are
 *    derivable from the inputs), none repeated;
 *  - no cycle in a diagram's dataflow, nor through composition (a diagram calling itself);
 *  - calls nested at most kMaxCallDepth deep (limits.hpp); each call can be lifted over its woven
 *    axes (lift.hpp), as derivation and the emitters run it;
 *  - every `out` names an array, and a diagram has at least one;
 *  - warnings: unused inputs, unused axes, statements whose result nothing reads.
 *  Runs on every diagram of every loaded file. Returns true when no error was reported.
 */
#pragma once
#include "diagrams/diagnostics.hpp"
#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"

namespace napkin {

/** Verifies all diagrams of `p`. `overrides` (from `--set`) apply to `main`, if given: its sizes
 *  are resolved with them, and the size checks of its calls use the resulting sizes. */
bool verify_program(const Program& p, DiagnosticEngine& diags, const Diagram* main = nullptr,
                    const SizeMap& overrides = {});

/** Verifies one diagram `d` that need not be one of `p`'s (a lifted callee, lift.hpp), resolving
 *  its calls against `p`'s diagrams: the per-diagram checks above, without the program-wide ones
 *  (composition cycles, call depth). Returns true when no error was reported. */
bool verify_diagram(const Program& p, const Diagram& d, DiagnosticEngine& diags, const SizeMap& overrides = {});

}  // namespace napkin
