/** \file lemmas.hpp
 *  The lemma library: when an operation is streamable along an axis (paper §3; the accumulator B
 *  with B(f(x), y) = f(x ++ y)), and with which carried state. Streamability cannot be derived
 *  structurally; each lemma is registered here with its source.
 *
 *  | id                     | applies to                                        | carried state            |
 *  |------------------------|---------------------------------------------------|--------------------------|
 *  | elementwise            | an operation woven over the axis                  | none (chunks concatenate)|
 *  | associative-sum        | contract, sum, mean reducing the axis             | running partial sums     |
 *  | max-monoid             | max reducing the axis                             | running maximum          |
 *  | online-softmax         | softmax along the axis, consumed only by          | (m, l, O) rescaled by    |
 *  |                        | contractions over it (FlashAttention)             | exp(m_old - m_new)       |
 *  | normalised-contraction | rmsnorm along the axis, consumed only by          | (acc, sum of squares)    |
 *  |                        | contractions over it (arXiv 2505.09326, Lemma 2)   |                          |
 *  | welford                | layernorm along the axis, consumed only by        | (acc, mean, M2, ...)     |
 *  |                        | contractions over it (Welford 1962 + linearity)    |                          |
 *  | two-pass-normalisation | softmax, layernorm or rmsnorm along the axis whose | pass 1: (m, l), (mean,   |
 *  |                        | output leaves indexed by it: `stream ... twice`    | M2) or sum of squares;   |
 *  |                        |                                                   | pass 2 re-reads and maps |
 *  | online-rescaled-sum    | a sum over the axis of exp(E - M) (times factors  | running sum s, rescaled  |
 *  |                        | free of loop results), M a max over the axis      | by exp(m_old - m_new)    |
 *  | chan-centred-moment    | a sum or mean over the axis of (E - mu) * (E - mu),| Chan's (n, mean, M2)     |
 *  |                        | mu = mean(E) over the same axes                   |                          |
 *  | atomic-sum             | a contraction over an axis grouped across blocks, | fp32 partials added into |
 *  |                        | the statement fp32 and linear in it (atomic_problem)| a zeroed global array    |
 *
 *  A reduction over the streamed axis that reads, inside it, another reduction over that axis
 *  (complete only after the loop) is streamable only through the last two lemmas, recognised
 *  structurally by reduction_form(); anything else is refused, naming the statement and the lemma
 *  that is missing. A statement that reduces the axis inside its expression but keeps it in its
 *  output (a normaliser written as an expression) is refused too.
 */
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "diagrams/weave.hpp"

namespace napkin {

struct Lemma {
  std::string id;
  std::string statement;  ///< what it says, one line
  std::string state;      ///< the carried state
  std::string source;     ///< where it comes from
};

const std::vector<Lemma>& lemma_library();
const Lemma& lemma(const std::string& id);

/** A lemma applied to one statement of a streamed kernel. */
struct LemmaUse {
  std::string statement;
  std::string lemma;
};

/** Whether the statements `kernel` (a fused set, in dataflow order) are streamable along `axis`.
 *  `escaping` lists the arrays the kernel must deliver to others. On success, the lemma used for
 *  every statement; on failure, the statement at fault and the reason, written for the user. */
struct StreamVerdict {
  bool ok = true;
  std::vector<LemmaUse> uses;
  const Statement* culprit = nullptr;
  std::string why;
};
/** The arithmetic of a lemma whose state the emitters render (written once, here): C++-syntax
 *  templates over `$name` placeholders. `state` (name, initial value) is per accumulator
 *  element; `chunk` names the per-chunk values the renderer computes first; `update` folds one
 *  chunk into the state; `finalise` is the reduction's value (before a mean's division), over
 *  the state after the last chunk (`$m_new` there is the final max). */
struct LemmaArithmetic {
  std::vector<std::pair<std::string, std::string>> state;
  std::vector<std::pair<std::string, std::string>> chunk;  ///< (name, what it is)
  std::vector<std::string> update;
  std::string finalise;
};
/** The arithmetic of `id` ("online-rescaled-sum", "chan-centred-moment"), or nullptr. */
const LemmaArithmetic* lemma_arithmetic(const std::string& id);
/** `templ` with every `$name` (longest name first) replaced by vars[name]. */
std::string render_template(const std::string& templ, const std::map<std::string, std::string>& vars);

/** How a reduction node over a streamed axis folds when it reads, inside it, a reduction's
 *  result over the same axis (an array of `after_loop`, complete only after the loop). */
struct ReductionForm {
  std::string lemma;               ///< "associative-sum", "max-monoid", "online-rescaled-sum", "chan-centred-moment"; empty: none
  std::string inner;               ///< the array read inside (M or mu), for the last two
  const Expr* centred = nullptr;   ///< chan-centred-moment: E in (E - mu) * (E - mu)
  const Expr* shifted_exp = nullptr;  ///< online-rescaled-sum: the factor exp(E - M), read as 0 where E = -inf
  std::string why;                 ///< when lemma is empty: what is missing, for the user
};
/** Recognises `node` (contract, sum, mean or max reducing `axis`) structurally. `kernel` holds the
 *  fused statements by name (the inner array must be one of them). */
ReductionForm reduction_form(const Expr& node, const std::string& axis,
                             const std::map<std::string, const StatementWeave*>& kernel,
                             const std::set<std::string>& after_loop);

/** Why statement `w` may not be accumulated across the thread blocks of a group partition of
 *  `axis` by atomic adds (lemma atomic-sum), or empty where it may: it reduces `axis` by exactly
 *  one contraction, its expression is linear in that contraction (products, quotients with it in
 *  the numerator, negation: a factor outside it is free of `axis`, so the blocks' partials times
 *  the factor sum to the whole), and it is declared fp32 (`declared`: the statement's dtype, else
 *  its output declaration's; the partial sums' precision). The
 *  kernel's rules (check_schedule.cpp) add that its output leaves the kernel and nothing in the
 *  kernel reads it (it is complete only after every block). */
std::string atomic_problem(const StatementWeave& w, const std::string& axis, std::optional<DType> declared);

/** The outermost contract, sum, max or mean nodes of `e` that reduce `axis` (each folds into one
 *  accumulator when `axis` is streamed). */
std::vector<const Expr*> reducers_over(const Expr& e, const std::string& axis);

StreamVerdict streamable(const std::vector<const StatementWeave*>& kernel, const std::string& axis,
                         const std::set<std::string>& escaping, int passes = 1);

}  // namespace napkin
