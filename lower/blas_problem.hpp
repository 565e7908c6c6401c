/** \file blas_problem.hpp
 *  A contraction as one (strided-batched) BLAS GEMM, the problem `napkin bench` hands cuBLAS
 *  (cublasGemmStridedBatchedEx) and cuBLASLt as references (kernels/bench.cpp, bench_spec.h).
 *
 *  The form: e = contract(X, Y; k), X and Y arrays, one contracted axis k. C = e's output in its
 *  own axis order [batch..., M, N]: M and N its last two axes, the others batch axes. The
 *  operands are oriented as lowering's gemm form orients them (orient_operands, gemm_form.hpp):
 *  A holds M and not N, B holds N and not M. Each operand is its batch axes (a subsequence of C's,
 *  in C's order) followed by a row-major matrix of its free axis and k in either order; an operand
 *  with none of the batch axes is broadcast (stride 0), one with some but not all is rejected
 *  (cuBLAS has one batch stride per operand).
 *
 *  Row-major throughout: A is [M, K] (trans_a false) or [K, M] (trans_a true, M innermost); B is
 *  [K, N] (trans_b false) or [N, K] (trans_b true, K innermost); C is [M, N] with leading
 *  dimension N. Lowering's gemm form picks M and N from the schedule's tiles and addresses every
 *  operand through its strides; the BLAS problem picks them from C's layout, because a BLAS call
 *  has one leading dimension per operand and writes C row-major.
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "diagrams/sizes.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

/** One contraction as a strided-batched GEMM (shapes in elements, at the sizes it was read at). */
struct BlasProblem {
  std::string a, b;               ///< operand arrays: A holds M, B holds N
  std::string M, N, K;            ///< axis names
  AxisList batch;                 ///< C's batch axes, outermost first
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch_count = 1;   ///< product of the batch axes' extents
  std::int64_t batch_a = 1, batch_b = 1;  ///< matrices each operand holds: batch_count, or 1 (broadcast)
  bool trans_a = false, trans_b = false;  ///< row-major A is [K, M]; row-major B is [N, K]
  std::int64_t lda = 0, ldb = 0;  ///< leading dimensions (row-major: the innermost extent)
  std::int64_t stride_a = 0, stride_b = 0;  ///< elements between consecutive batch matrices; 0 when broadcast
  DType dtype = DType::bf16;      ///< A's storage dtype
};

/** `e` (a node of a statement of `d`) read as a BlasProblem at `sizes` (every axis of `d` sized);
 *  `typer` types `d`'s expressions. nullopt with `why` set when it is not of that form (not a
 *  contraction of two arrays over one axis, C of fewer than two axes, M and N not one operand's
 *  each, an operand not batch axes then a matrix of its free axis and k, an operand holding
 *  only some of the batch). Raises nothing. */
std::optional<BlasProblem> blas_problem(const Diagram& d, Typer& typer, const Expr& e, const SizeMap& sizes, std::string& why);

}  // namespace napkin
