/** \file grad.hpp
 *  Reverse mode on diagrams: from a diagram, the diagram of its gradient, in the same language
 *  (`napkin grad`). The adjoint rules and their sources are in adjoints.hpp.
 *
 *  The result is a file of two diagrams:
 *  - `<D>_fwd`: D with its calls inlined (inline_calls.hpp), every normaliser (softmax, layernorm,
 *    rmsnorm) that is not a whole right-hand side moved into a statement of its own
 *    (`<S>_<op>`), every contraction or reduction that is the argument of a function whose
 *    adjoint reads its argument (grad::adjoint_reads_argument: silu, gelu, log, ...) moved into a
 *    statement `<S>_v` of its own (computed once, and a candidate to save), and, as extra outputs, the row statistics of each normaliser the backward
 *    differentiates: `<P>_lse = logsumexp(X; a)` of a softmax P, `<Y>_rstd` (and `<Y>_mean` for a
 *    layernorm) of a norm Y, in fp32. Its other outputs are D's.
 *  - `<D>_bwd`: inputs, in order, the forward inputs it reads, one cotangent `d<O>` per output O that
 *    depends on a differentiated input (O's axes and dtype), and the saved statistics; then the
 *    forward statements it needs, recomputed (a softmax from its statistic, exp(X - lse), and the
 *    norms from theirs); then one statement per adjoint, `d<A>` for array A (the sum of the
 *    contributions of A's uses), plus `<S>_<k>` for a value inside a statement that a rule reads
 *    twice and that holds a contraction or a reduction, and `d<S>_<k>` for such a cotangent; outputs
 *    `d<X>` for each X of `wrt`, with X's axes and dtype.
 *  An adjoint may lack axes of its array (constant along them: the cotangent of a broadcast); the
 *  outputs have every axis of their input. New names are made fresh (`dQ_1` when `dQ` is taken).
 *  The text of the file parses back to it and prints identically; the backward evaluated by the
 *  fp64 evaluator equals central finite differences of the forward (tests/unit/grad_test.cpp).
 */
#pragma once
#include <string>
#include <vector>

#include "diagrams/program.hpp"

namespace napkin {

/** A statistic saved by the forward for the backward. */
struct SavedStatistic {
  std::string name;       ///< output of `<D>_fwd`, input of `<D>_bwd`
  std::string statement;  ///< the normaliser statement it belongs to
  std::string what;       ///< "logsumexp", "mean" or "rstd"
};

struct GradResult {
  File file;                             ///< `<D>_fwd`, then `<D>_bwd`
  std::vector<std::string> wrt;          ///< differentiated inputs, in order
  std::vector<std::string> cotangents;   ///< cotangent inputs of the backward, `d<O>`
  std::vector<SavedStatistic> saved;     ///< statistics the forward saves
  std::vector<std::string> recomputed;   ///< forward statements the backward recomputes, in order
  std::vector<std::string> stored;       ///< forward statements saved instead (`save`), in order
};

/** Differentiates `d` (a verified diagram of `p`, built-ins as written or expanded) with respect to
 *  the inputs `wrt` (empty: every input of a floating-point dtype that some output depends on).
 *  Each statement of `save` (named as in `<D>_fwd`: an inlined call's statements as
 *  `<S>_<name>`) that the backward reads is saved rather than recomputed (activation
 *  checkpointing's choice, derive/checkpoint.hpp): `<D>_fwd` outputs it, in its dtype label or else
 *  the dtype of D's first output, and `<D>_bwd` takes it as an input (`# saved by the forward`).
 *  Raises UserError for a name of `wrt` that is not an input of d, an integer input, or an input
 *  no output depends on, for a name of `save` that is no statement of `<D>_fwd`, and where
 *  inlining a call does (inline_calls.hpp). */
GradResult differentiate(const Program& p, const Diagram& d, const std::vector<std::string>& wrt,
                         const std::vector<std::string>& save = {});

}  // namespace napkin
