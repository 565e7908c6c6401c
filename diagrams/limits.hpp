/** \file limits.hpp
 *  Limits on nesting that every later walk of a program relies on: how deep imports and calls of
 *  other diagrams may nest, and how many calls a diagram may expand to. The evaluator, the derivation and the emitters recurse once per
 *  nested call (and the loader once per nested import), so a chain without a bound overflows the
 *  stack; with these limits checked when the program is loaded and verified, none of them needs
 *  a check of its own. Expression nesting is bounded by the parser (256 levels, parser.cpp).
 *
 *  Measured (RelWithDebInfo, 8 MiB stack, before the limits): a chain of about 3000 nested calls
 *  crashed `derive`, about 5000 `eval` and `emit`, about 15000 nested imports `check`. A real
 *  model nests a handful of levels (the transformer block: block -> attention, 1 call deep; a
 *  model of blocks of layers a few more). The limits are 64 for both: far beyond any model, and
 *  far below the crashes: the worst case they admit (64 nested calls, each inside an expression
 *  nested 250 deep) runs check, eval, derive, emit and render within 1 MiB of stack, an eighth of
 *  the usual 8 MiB (tests/unit/scale_test.cpp runs them in 2 MiB).
 */
#pragma once
#include "diagrams/diagnostics.hpp"

namespace napkin {

struct Program;

/** Most imports nested in one another (the main file imports a file that imports ...). */
inline constexpr int kMaxImportDepth = 64;
/** Most calls of diagrams nested in one another, from any diagram down. */
inline constexpr int kMaxCallDepth = 64;

/** Most calls in the expanded call tree below one diagram, each call inside a called diagram
 *  counted once per call of that diagram. The emitters write (and the evaluator runs) a callee
 *  once per call, so diagrams that each call the next twice expand as 2^depth: bounded here. A
 *  model of 126 layers with 4 calls each (Llama-3-405B) makes about 500. */
inline constexpr int kMaxExpandedCalls = 4096;

/** Reports, at the call, every call nested deeper than kMaxCallDepth below some diagram of `p`,
 *  with the chain of diagrams that leads to it; and, at its first call, every diagram that first
 *  expands to more than kMaxExpandedCalls calls. Does nothing when the call graph has a cycle
 *  (verify reports cycles itself). */
void check_call_depth(const Program& p, DiagnosticEngine& diags);

}  // namespace napkin
