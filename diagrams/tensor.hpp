/** \file tensor.hpp
 *  Dense fp64 tensors with named axes, row-major in the order of `axes`: the values the reference
 *  evaluator computes with. Element-wise operations broadcast by axis name.
 */
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "diagrams/sizes.hpp"
#include "diagrams/typing.hpp"

namespace napkin {

/** Largest tensor, in elements (2^28 fp64 = 2 GiB). */
inline constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 28;

struct Tensor {
  AxisList axes;
  std::vector<std::int64_t> shape;  ///< elements along each axis
  std::vector<double> data;         ///< row-major, size = product of shape

  /** A tensor of zeros (or `fill`) over `axes`, sized by `sizes`. Every new tensor of the
   *  evaluator is made here, so here the size is checked before allocating: raises UserError
   *  (with the elements and bytes) past kMaxTensorElements, and when the allocation fails. */
  static Tensor filled(const AxisList& axes, const SizeMap& sizes, double fill = 0.0);
  static Tensor scalar(double v);
  std::int64_t size() const { return static_cast<std::int64_t>(data.size()); }
  /** Stride in elements along axis `a`, or 0 when the tensor lacks it (broadcast). */
  std::int64_t stride_of(const std::string& a) const;
  SizeMap sizes() const;
};

/** The values of a tensor that are NaN or infinite: how many, and the first in row-major order
 *  (its index along each axis, and the value). count 0: every value is finite. */
struct NonFinite {
  std::int64_t count = 0;
  std::vector<std::int64_t> first;
  double value = 0;
};
NonFinite non_finite(const Tensor& t);

/** Element-wise map of one operand. */
Tensor map1(const Tensor& x, const std::function<double(double)>& f);
/** Element-wise map of two operands, broadcast by axis name; result axes: x's, then y's others. */
Tensor map2(const Tensor& x, const Tensor& y, const std::function<double(double, double)>& f);
/** einsum: product of `operands` summed over `reduced`; result axes: union minus reduced. */
Tensor contract(const std::vector<const Tensor*>& operands, const AxisList& reduced);
/** Reduction of `x` over `reduced` with `init` and `combine` (sum: 0 and +; max: -inf and max). */
Tensor reduce(const Tensor& x, const AxisList& reduced, double init, double (*combine)(double, double));
/** The same values laid out with axes in `order` (a permutation of x.axes). */
Tensor permute(const Tensor& x, const AxisList& order);
/** The sub-tensor at `index` along `fixed` axes (which are dropped). */
Tensor slice(const Tensor& x, const std::vector<std::pair<std::string, std::int64_t>>& fixed);
/** Writes `part` into `whole` at `index` along `fixed` axes (the inverse of slice). */
void place(Tensor& whole, const Tensor& part, const std::vector<std::pair<std::string, std::int64_t>>& fixed);

}  // namespace napkin
