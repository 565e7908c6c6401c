#include "lower/options.hpp"

namespace napkin {

DType storage_dtype(const Diagram& d, const std::string& array, const ModelOptions& opt) {
  const auto* in = d.find_input(array);
  if (in && in->dtype == DType::int32) return in->dtype;  // indices (gather targets) are not quantised
  if (opt.dtype) return *opt.dtype;
  if (in) return in->dtype;
  for (const auto* o : d.outputs())
    if (o->name == array) return o->dtype;
  if (const auto* s = d.find_statement(array); s && s->dtype) return *s->dtype;
  auto outs = d.outputs();
  return outs.empty() ? DType::fp32 : outs.front()->dtype;
}

}  // namespace napkin
