/** \file builtins.hpp
 *  Expansion of the built-ins that are written as one operation but derived as several, so that
 *  derivation, the lemma library, the model and every emitter see only the core operations and
 *  stream them with the lemmas that already hold (derive/lemmas.hpp):
 *  - `logsumexp(E; v...)` becomes `M + log(sum(exp(E - M); v...))` with a new statement
 *    `M[r] = max(E; v...)` (r: E's axes less v, in E's order), named `<S>_max` after the statement
 *    S holding it (`_max2`, `_max3`, ... when the name is taken): the form that the
 *    online-rescaled-sum lemma streams in one pass;
 *  - `l2norm(E; v[, eps=1e-12])` becomes `E * rsqrt(sum(E * E; v) + eps)`: a normaliser inside an
 *    expression, streamed in two passes;
 *  - `gather(L, T; v)` becomes `sum(pick(L, T; v); v)`: the one-hot contraction (pick is L where
 *    index(v) == T, else 0, a select and not a product, so an infinite L elsewhere stays out), v
 *    reduced, streamed by the associative-sum lemma like any sum.
 *  A node whose typing fails is left as written: verification then reports it there. Locations are
 *  the built-in's. `napkin print` shows the file as written (load_program's `expand` false); every
 *  other command works on the expansion. The fp64 evaluator evaluates both forms (the tests compare
 *  the expansion, derived and emitted, against the evaluator of the diagram as written).
 */
#pragma once
#include "diagrams/program.hpp"

namespace napkin {

/** Expands logsumexp, l2norm and gather in every diagram of `p`, in place (the Diagram objects, and so
 *  Program::diagrams, stay where they are). Idempotent; raises nothing. */
void expand_builtins(Program& p);

/** True if `e` holds a logsumexp, an l2norm or a gather (derivation takes only expanded diagrams). */
bool has_unexpanded_builtin(const Expr& e);

}  // namespace napkin
