#include "diagrams/tensor.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <new>

#include "diagrams/diagnostics.hpp"

namespace napkin {

namespace {
/** Visits every index of `shape` in row-major order, keeping one flat offset per operand
 *  (strides[k][i]: operand k's stride along loop axis i, 0 when broadcast). */
template <class F>
void loop(const std::vector<std::int64_t>& shape, const std::vector<std::vector<std::int64_t>>& strides, F&& f) {
  std::size_t n = shape.size(), k = strides.size();
  for (auto s : shape)
    if (s == 0) return;
  std::vector<std::int64_t> idx(n, 0), off(k, 0);
  while (true) {
    f(off.data());
    std::size_t i = n;
    while (i > 0) {
      --i;
      ++idx[i];
      for (std::size_t j = 0; j < k; ++j) off[j] += strides[j][i];
      if (idx[i] < shape[i]) break;
      for (std::size_t j = 0; j < k; ++j) off[j] -= strides[j][i] * shape[i];
      idx[i] = 0;
      if (i == 0) return;
    }
    if (n == 0) return;
  }
}

std::vector<std::int64_t> strides_along(const Tensor& t, const AxisList& axes) {
  std::vector<std::int64_t> s;
  for (const auto& a : axes) s.push_back(t.stride_of(a));
  return s;
}

std::vector<std::int64_t> shape_of(const AxisList& axes, const SizeMap& sizes) {
  std::vector<std::int64_t> s;
  for (const auto& a : axes) s.push_back(sizes.at(a));
  return s;
}

SizeMap merged_sizes(const std::vector<const Tensor*>& ts) {
  SizeMap m;
  for (const auto* t : ts)
    for (std::size_t i = 0; i < t->axes.size(); ++i) m[t->axes[i]] = t->shape[i];
  return m;
}
}  // namespace

Tensor Tensor::filled(const AxisList& axes, const SizeMap& sizes, double fill) {
  Tensor t;
  t.axes = axes;
  t.shape = shape_of(axes, sizes);
  double elements = 1;  // in double: the product of the sizes may not fit in 64 bits
  for (auto s : t.shape) elements *= static_cast<double>(s);
  auto what = [&] {
    std::string over;
    for (const auto& a : axes) over += (over.empty() ? "" : ", ") + a;
    char figures[96];
    std::snprintf(figures, sizeof figures, "of %.0f elements (%.0f bytes, %.1f GiB)", elements, elements * 8, elements * 8 / 0x1p30);
    return "an array over (" + over + ") " + figures;
  };
  if (elements > static_cast<double>(kMaxTensorElements))
    throw UserError("the fp64 reference evaluator would need " + what() +
                    "; it holds at most 2^28 elements (2 GiB) per array; shrink axes with --set");
  try {
    t.data.assign(static_cast<std::size_t>(elements), fill);
  } catch (const std::bad_alloc&) {
    throw UserError("out of memory: allocating " + what() + " failed; shrink axes with --set");
  }
  return t;
}

Tensor Tensor::scalar(double v) {
  Tensor t;
  t.data = {v};
  return t;
}

std::int64_t Tensor::stride_of(const std::string& a) const {
  std::int64_t stride = 1;
  for (std::size_t i = axes.size(); i-- > 0;) {
    if (axes[i] == a) return stride;
    stride *= shape[i];
  }
  return 0;
}

SizeMap Tensor::sizes() const { return merged_sizes({this}); }

NonFinite non_finite(const Tensor& t) {
  NonFinite r;
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    if (std::isfinite(t.data[i])) continue;
    if (r.count++ > 0) continue;
    r.value = t.data[i];
    r.first.assign(t.shape.size(), 0);
    auto rest = static_cast<std::int64_t>(i);
    for (std::size_t k = t.shape.size(); k-- > 0;) {
      r.first[k] = rest % t.shape[k];
      rest /= t.shape[k];
    }
  }
  return r;
}

Tensor map1(const Tensor& x, const std::function<double(double)>& f) {
  Tensor r = x;
  for (auto& v : r.data) v = f(v);
  return r;
}

Tensor map2(const Tensor& x, const Tensor& y, const std::function<double(double, double)>& f) {
  AxisList axes = axis_union({x.axes, y.axes});
  Tensor r = Tensor::filled(axes, merged_sizes({&x, &y}));
  loop(r.shape, {strides_along(x, axes), strides_along(y, axes), strides_along(r, axes)},
       [&](const std::int64_t* o) { r.data[static_cast<std::size_t>(o[2])] = f(x.data[static_cast<std::size_t>(o[0])], y.data[static_cast<std::size_t>(o[1])]); });
  return r;
}

Tensor contract(const std::vector<const Tensor*>& operands, const AxisList& reduced) {
  std::vector<AxisList> lists;
  for (const auto* t : operands) lists.push_back(t->axes);
  AxisList all = axis_union(lists), kept;
  for (const auto& a : all)
    if (!contains(reduced, a)) kept.push_back(a);
  SizeMap sizes = merged_sizes(operands);
  Tensor r = Tensor::filled(kept, sizes);
  AxisList order = kept;
  order.insert(order.end(), reduced.begin(), reduced.end());
  std::vector<std::vector<std::int64_t>> strides;
  for (const auto* t : operands) strides.push_back(strides_along(*t, order));
  strides.push_back(strides_along(r, order));
  std::size_t n = operands.size();
  loop(shape_of(order, sizes), strides, [&](const std::int64_t* o) {
    double p = 1.0;
    for (std::size_t k = 0; k < n; ++k) p *= operands[k]->data[static_cast<std::size_t>(o[k])];
    r.data[static_cast<std::size_t>(o[n])] += p;
  });
  return r;
}

Tensor reduce(const Tensor& x, const AxisList& reduced, double init, double (*combine)(double, double)) {
  AxisList kept, order;
  for (const auto& a : x.axes)
    if (!contains(reduced, a)) kept.push_back(a);
  order = kept;
  order.insert(order.end(), reduced.begin(), reduced.end());
  SizeMap sizes = x.sizes();
  Tensor r = Tensor::filled(kept, sizes, init);
  loop(shape_of(order, sizes), {strides_along(x, order), strides_along(r, order)}, [&](const std::int64_t* o) {
    double& acc = r.data[static_cast<std::size_t>(o[1])];
    acc = combine(acc, x.data[static_cast<std::size_t>(o[0])]);
  });
  return r;
}

Tensor permute(const Tensor& x, const AxisList& order) {
  NAPKIN_ASSERT(order.size() == x.axes.size()) << "permute to a different rank";
  if (order == x.axes) return x;
  Tensor r = Tensor::filled(order, x.sizes());
  loop(r.shape, {strides_along(x, order), strides_along(r, order)},
       [&](const std::int64_t* o) { r.data[static_cast<std::size_t>(o[1])] = x.data[static_cast<std::size_t>(o[0])]; });
  return r;
}

Tensor slice(const Tensor& x, const std::vector<std::pair<std::string, std::int64_t>>& fixed) {
  AxisList kept;
  std::int64_t base = 0;
  for (const auto& a : x.axes) {
    bool is_fixed = false;
    for (const auto& [f, i] : fixed)
      if (f == a) base += i * x.stride_of(a), is_fixed = true;
    if (!is_fixed) kept.push_back(a);
  }
  Tensor r = Tensor::filled(kept, x.sizes());
  loop(r.shape, {strides_along(x, kept), strides_along(r, kept)}, [&](const std::int64_t* o) {
    r.data[static_cast<std::size_t>(o[1])] = x.data[static_cast<std::size_t>(base + o[0])];
  });
  return r;
}

void place(Tensor& whole, const Tensor& part, const std::vector<std::pair<std::string, std::int64_t>>& fixed) {
  std::int64_t base = 0;
  for (const auto& [f, i] : fixed) base += i * whole.stride_of(f);
  loop(part.shape, {strides_along(whole, part.axes), strides_along(part, part.axes)}, [&](const std::int64_t* o) {
    whole.data[static_cast<std::size_t>(base + o[0])] = part.data[static_cast<std::size_t>(o[1])];
  });
}

}  // namespace napkin
