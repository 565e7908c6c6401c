// A contraction as a strided-batched BLAS GEMM (contract in blas_problem.hpp).
#include "lower/blas_problem.hpp"

#include "lower/gemm_form.hpp"
#include "lower/options.hpp"

namespace napkin {

namespace {

/** Whether `ax` is some of `batch` (in its order) followed by `free` and `k` in either order. */
bool batched_matrix(const AxisList& ax, const AxisList& batch, const std::string& free, const std::string& k) {
  if (ax.size() < 2) return false;
  const std::string &r = ax[ax.size() - 2], &c = ax.back();
  if (!((r == free && c == k) || (r == k && c == free))) return false;
  std::size_t j = 0;
  for (const auto& b : batch)
    if (j + 2 < ax.size() && ax[j] == b) ++j;
  return j + 2 == ax.size();
}

}  // namespace

std::optional<BlasProblem> blas_problem(const Diagram& d, Typer& typer, const Expr& e, const SizeMap& sizes, std::string& why) {
  if (e.kind != Expr::Kind::apply || e.op != Op::contract || e.args.size() != 2 || e.axes.size() != 1)
    return why = "not a contraction of two operands over one axis", std::nullopt;
  const Expr &x = *e.args[0], &y = *e.args[1];
  if (x.kind != Expr::Kind::ref || y.kind != Expr::Kind::ref || !d.array_axes(x.name) || !d.array_axes(y.name))
    return why = "an operand is not an array", std::nullopt;
  const AxisList out = typer.axes_of(e).value_or(AxisList{});
  if (out.size() < 2) return why = "the result has fewer than two axes", std::nullopt;
  BlasProblem p;
  p.M = out[out.size() - 2], p.N = out.back(), p.K = e.axes[0];
  p.batch.assign(out.begin(), out.end() - 2);
  const auto roles = orient_operands(x.name, *d.array_axes(x.name), y.name, *d.array_axes(y.name), p.M, p.N);
  if (!roles) return why = "the result's last two axes (" + p.M + ", " + p.N + ") are not one operand's each", std::nullopt;
  p.a = roles->a, p.b = roles->b;
  const AxisList &xa = roles->a_axes, &ya = roles->b_axes;
  if (!batched_matrix(xa, p.batch, p.M, p.K)) return why = p.a + " is not batch axes then a matrix of " + p.M + " and " + p.K, std::nullopt;
  if (!batched_matrix(ya, p.batch, p.N, p.K)) return why = p.b + " is not batch axes then a matrix of " + p.N + " and " + p.K, std::nullopt;
  p.batch_count = product(sizes, p.batch);
  p.batch_a = product(sizes, AxisList(xa.begin(), xa.end() - 2));
  p.batch_b = product(sizes, AxisList(ya.begin(), ya.end() - 2));
  for (const auto& [arr, held] : {std::pair{p.a, p.batch_a}, std::pair{p.b, p.batch_b}})
    if (held != p.batch_count && held != 1) return why = arr + " holds some of the batch axes but not all (one batch stride per operand)", std::nullopt;
  p.m = sizes.at(p.M), p.n = sizes.at(p.N), p.k = sizes.at(p.K);
  p.trans_a = xa.back() == p.M;
  p.trans_b = ya.back() == p.K;
  p.lda = p.trans_a ? p.m : p.k;
  p.ldb = p.trans_b ? p.k : p.n;
  p.stride_a = p.batch_a == 1 ? 0 : p.m * p.k;
  p.stride_b = p.batch_b == 1 ? 0 : p.k * p.n;
  p.dtype = storage_dtype(d, p.a, {});
  return p;
}

}  // namespace napkin
