/** \file adjoints.hpp
 *  The adjoint rules of reverse mode (grad.hpp): for each operation, the cotangent of each operand
 *  from the cotangent of the result, written as expressions of the diagram language.
 *
 *  A cotangent is a Term: an expression with the axes it has. It may lack axes of the array it is
 *  the cotangent of: it is then constant along them (a broadcast, kept compressed, since every use
 *  broadcasts by axis name). Summing a cotangent over an axis it lacks multiplies it by the axis's
 *  size (sum_over); taking it where an axis must be present adds 0 * pos(a) (expand).
 *
 *  Rules and their sources (standard calculus; the normalisers' closed forms as in the references):
 *  - element-wise maps: the chain rule with the derivative of each map; relu' = step (relu'(0) = 0,
 *    PyTorch's threshold_backward), gelu'(x) = Phi(x) + x phi(x) (Hendrycks and Gimpel 2016, exact erf
 *    form), gelu_tanh'(x) = (1 + t)/2 + x (1 - t^2) k (1 + 3 c x^2) / 2 with t = tanh(k (x + c x^3)),
 *    k = sqrt(2/pi), c = 0.044715, silu' = s (1 + x (1 - s)) with s = sigmoid, tanh' = 1 - tanh^2, rsqrt' = -rsqrt^3 / 2,
 *    erf' = 2/sqrt(pi) exp(-x^2), abs' = step(x) - step(-x), pow(x, p)' = p pow(x, p - 1); step has
 *    derivative 0; cast passes the cotangent through (the straight-through estimator: rounding has
 *    derivative 0 almost everywhere, and the gradient of the real-valued function is what is wanted);
 *  - broadcasting + - * / min max: the cotangent summed over the axes the operand lacks (the
 *    adjoint of a broadcast is a sum); min and max send it to the operand they picked (ties: the
 *    first operand, as fmin and fmax return it);
 *  - contract (einsum): the cotangent of operand i is the contraction of the result's cotangent
 *    with the other operands over every axis operand i lacks (the product rule, term by term);
 *    scalar factors of the cotangent are written outside the contraction (linearity), so that
 *    `contract(dS, K; x) * rsqrt(d)` keeps the form of a contraction with an epilogue;
 *  - sum: a broadcast of the cotangent; mean: the same over the count; max over axes: the cotangent
 *    to every element equal to the maximum (each tied element gets all of it);
 *  - softmax(X; a) = P: dX = P (dP - sum(dP P; a)) (the Jacobian diag(P) - P P^T), with P recomputed
 *    from the saved row statistic L = logsumexp(X; a) as exp(X - L) (FlashAttention-2, Dao 2023,
 *    Algorithm 2: the backward recomputes P from the saved logsumexp); when P is read only by one
 *    contraction O = contract(P, V, ..; r) that keeps P's rows (r holds none of P's axes but a),
 *    sum(dP P; a) = sum(dO O) over O's axes that are not P's rows (O is linear in P:
 *    <dP, P> = <dO, O> row by row), FlashAttention-2's D = rowsum(dO o O), which reads O (a
 *    forward output) instead of the q x x arrays dP and P;
 *  - logsumexp(X; r) = Y: dX = dY exp(X - Y);
 *  - rmsnorm(X, W; a) = X r W with r = rsqrt(mean(X^2; a) + eps): with g = dY W,
 *    dX = r g - X r^3 mean(g X; a), dW = sum over X's other axes of dY X r (Zhang and Sennrich 2019);
 *  - layernorm(X, W, B; a) = xh W + B with xh = (X - mu) r: dX = r (g - mean(g; a) - xh mean(g xh; a)),
 *    dW = sum of dY xh, dB = sum of dY (Ba, Kiros and Hinton 2016); rmsnorm and layernorm read the
 *    saved mu and r;
 *  - l2norm(X; a) = X r with r = rsqrt(sum(X^2; a) + eps): dX = r dY - X r^3 sum(dY X; a);
 *  - mask(X, M): dX = dY where M != 0 (step(abs(M)); causal and band masks are 0 or 1 already),
 *    0 elsewhere; gather(L, T; v) and pick(L, T; v): dL = pick(dY, T; v) (the one-hot scatter).
 *  Positional functions, numbers, axis sizes and integer targets have no cotangent.
 */
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/ir.hpp"
#include "diagrams/typing.hpp"

namespace napkin::grad {

/** An expression and the axes of its value (outermost first; empty for a scalar). */
struct Term {
  ExprPtr e;
  AxisList axes;
};

/** Builders that keep a Term's axes by the typing rules (typing.hpp) and build trees as the parser
 *  would read their printed text, so that print and parse round-trip. */
Term number(double v);
Term axis_size(const std::string& axis);
Term ref(const std::string& name, const AxisList& axes);
Term unary(Op op, const Term& x);
/** a op b for add, sub, mul, div, minimum, maximum, pow; multiplying by the number 1 is dropped. */
Term binary(Op op, const Term& a, const Term& b);
Term neg(const Term& x);
/** sum of `x` over `axes`: a sum over those it has, times the size of each it lacks. */
Term sum_over(const Term& x, const AxisList& axes);
/** mean of `x` over `axes` (the axes it lacks leave it unchanged). */
Term mean_over(const Term& x, const AxisList& axes);
/** contract(terms...; reduced), reduced limited to the axes the terms have; a single term with
 *  nothing to reduce is returned as it is. */
Term contract_terms(const std::vector<Term>& terms, const AxisList& reduced);
/** `x` with every axis of `need` it lacks added (x + 0 * pos(a)): where an operation needs it. */
Term expand(const Term& x, const AxisList& need);
/** The cotangent `c` of a value with axes `full`, for an operand with axes `target`: summed over
 *  the axes of `full` the operand lacks (the adjoint of broadcasting). */
Term unbroadcast(const Term& c, const AxisList& target, const AxisList& full);

/** The saved statistics of a normaliser statement (grad.hpp): row logsumexp of a softmax; mean and
 *  reciprocal standard deviation of a layernorm; reciprocal root mean square of an rmsnorm. */
struct SavedStats {
  std::optional<Term> lse, mean, rstd;
};

/** What a rule reads besides its node: the cotangent, the values of subexpressions (the node's
 *  operands or the node itself, recomputed or read from a statement), their axes, and the saved
 *  statistics when the node is a normaliser statement's right-hand side. */
struct RuleContext {
  Term cot;
  std::function<Term(const Expr&)> value;
  std::function<AxisList(const Expr&)> axes_of;
  /** True for an expression of numbers and axis sizes alone (a scalar: rsqrt(d)). */
  std::function<bool(const Expr&)> scalar;
  /** A statement of its own for `t` (a row reduction inside an element-wise expression), named
   *  after the cotangent's statement and `what`: the form the kernel forms take (a rows kernel,
   *  then element-wise maps), instead of the reduction recomputed per element. */
  std::function<Term(const Term& t, const std::string& what)> keep;
  const SavedStats* saved = nullptr;
  /** For a softmax P read only by a contraction O linear in it: sum(dP * P; a) computed as
   *  sum(dO * O) over O's other axes (grad.hpp), to be used as it is. */
  std::optional<Term> softmax_rowsum;
};

/** The cotangent of operand `i` of the apply node `node`, or nullopt when the operand has none
 *  (an integer target, a mask, an exponent, an operation whose derivative is 0). Raises
 *  InternalError for an operation without a rule (call: inline first). */
std::optional<Term> operand_cotangent(const Expr& node, std::size_t i, const RuleContext& ctx);

/** Whether the adjoint rule of the one-operand element-wise `op` (elementwise_unary) reads the
 *  operand's value (log, relu, abs, erf, silu, gelu, gelu_tanh), not only the node's own value (exp,
 *  sigmoid, tanh, sqrt, rsqrt) or nothing (neg, cast). */
bool adjoint_reads_argument(Op op);

}  // namespace napkin::grad
