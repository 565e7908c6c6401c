/** \file typing.hpp
 *  Axis inference: which named axes an expression's result carries (weaving is implicit by axis
 *  name, as in einsum). The rules, per operation:
 *  - array reference: the array's axes; axis reference (`d` in `rsqrt(d)`): a scalar, no axes;
 *  - element-wise maps and + - * /: the union of the operands' axes, left operand's order first
 *    (broadcasting by name);
 *  - contract(A, B, ...; r...): union of operands' axes minus the reduced axes r, each of which
 *    must occur in some operand;
 *  - sum/max/mean(X; r...): X's axes minus r, each r in X;
 *  - softmax(X; a), layernorm(X[, W[, B]]; a), rmsnorm(X[, W]; a): X's axes, a in X; the weight
 *    and bias axes must be axes of X;
 *  - min(A, B), max(A, B) (element-wise: two operands, no ';'): the union, as A + B;
 *    pow(X, p): X's axes, p a number;
 *  - logsumexp(X; r...): as sum; l2norm(X; a[, eps]): X's axes, a in X;
 *  - gather(L, T; v): L's axes less v; pick(L, T; v): L's axes; v in L, T an integer-dtype array
 *    whose axes are L's less v (some or all);
 *  - mask(X, M): X's axes; M's axes must be axes of X; causal(q, x[; window=W]) and
 *    band(q, x; lo=L, hi=H): [q, x], integer options (W >= 1, L <= H); pos(q): [q];
 *  - a call of diagram D: D's output axes renamed by the call's binding (callee axis k binds the
 *    caller axis k unless `k=other` is given), plus the woven axes: caller axes of the arguments
 *    that no callee axis binds, over which the call is mapped.
 */
#pragma once
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include <unordered_map>

#include "diagrams/diagnostics.hpp"
#include "diagrams/ir.hpp"

namespace napkin {

using DiagramTable = std::map<std::string, const Diagram*>;
using AxisList = std::vector<std::string>;

/** How a call maps onto its callee: callee axis -> caller axis, and the woven caller axes. */
struct CallShape {
  const Diagram* callee = nullptr;
  std::map<std::string, std::string> bind;
  AxisList woven;
  AxisList result;  ///< caller axes of the call's result: bound output axes, then woven axes
};

class Typer {
 public:
  /** `diags` may be null (no reporting: for verified diagrams). `broken` lists "diagram.array"
   *  names whose definition failed to parse: their uses are not reported again. */
  Typer(const Diagram& d, const DiagramTable& table, DiagnosticEngine* diags,
        const std::set<std::string>* broken = nullptr)
      : d_(d), table_(table), diags_(diags), broken_(broken) {}

  /** Axes of `e`'s result, or nullopt after reporting an error. Without `diags` (a verified
   *  diagram) each node's axes are kept by address for the Typer's lifetime, so typing every node
   *  of an expression (the model's FLOP count) is linear in its size, not in size x depth. */
  std::optional<AxisList> axes_of(const Expr& e);
  /** The shape of a call whose argument axes are `arg_axes`; nullopt after an error. */
  std::optional<CallShape> call_shape(const Expr& call, const std::vector<AxisList>& arg_axes);

 private:
  std::optional<AxisList> apply(const Expr& e);
  bool error(SourceLoc loc, const std::string& msg);
  bool check_axis_known(const std::string& a, SourceLoc loc);
  /** The `eps` option of a normalisation `name`: at most once, a finite number above 0. */
  bool epsilon_in_range(const Expr& e, const std::string& name);
  /** The axes of causal(q, x[; window=W]), band(q, x; lo=L, hi=H) and pos(q); errors located. */
  std::optional<AxisList> positional(const Expr& e);
  /** The axes of gather(L, T; v) (L's less v) and pick(L, T; v) (L's), given L's axes `rows` and
   *  T's `targets`: one axis v, in L and not in T; T's axes L's; T names an array of an integer
   *  dtype. Errors located at the axis or at T. */
  std::optional<AxisList> gather(const Expr& e, const AxisList& rows, const AxisList& targets);
  /** Checks option `key` of `e`: given at most once, an integer in [lo, 2^40]; nullopt if absent
   *  (reported when `required`) or bad (reported). */
  std::optional<std::int64_t> integer_option(const Expr& e, const std::string& key, std::int64_t lo, bool required, bool& ok);

  const Diagram& d_;
  const DiagramTable& table_;
  DiagnosticEngine* diags_;
  const std::set<std::string>* broken_;
  std::unordered_map<const Expr*, std::optional<AxisList>> memo_;  ///< apply() nodes, when diags_ is null
};

/** Union of axis lists, in order of first appearance. */
AxisList axis_union(const std::vector<AxisList>& lists);
bool contains(const AxisList& l, const std::string& a);

}  // namespace napkin
