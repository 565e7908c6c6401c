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
 */
#pragma once
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
StreamVerdict streamable(const std::vector<const StatementWeave*>& kernel, const std::string& axis,
                         const std::set<std::string>& escaping, int passes = 1);

}  // namespace napkin
