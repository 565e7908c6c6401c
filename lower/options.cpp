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

Diagram stored_as(const Diagram& d, const ModelOptions& opt) {
  Diagram out = d;
  for (auto& item : out.items) {
    if (auto* in = std::get_if<InputDecl>(&item)) in->dtype = storage_dtype(d, in->name, opt);
    else if (auto* st = std::get_if<Statement>(&item); st && st->dtype) st->dtype = storage_dtype(d, st->name, opt);
    else if (auto* o = std::get_if<OutputDecl>(&item)) o->dtype = storage_dtype(d, o->name, opt);
  }
  return out;
}

}  // namespace napkin
