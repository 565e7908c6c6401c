#include "lower/options.hpp"

namespace napkin {

bool quantized_override(const ModelOptions& opt) { return opt.dtype && dtype_bits(*opt.dtype) <= 8; }

namespace {

/** The input `s` copies unchanged (its expression a reference to an input: a relayout), or null. */
const InputDecl* copied_input(const Diagram& d, const Statement* s) {
  if (!s || s->expr->kind != Expr::Kind::ref) return nullptr;
  return d.find_input(s->expr->name);
}

}  // namespace

DType storage_dtype(const Diagram& d, const std::string& array, const ModelOptions& opt) {
  const auto* in = d.find_input(array);
  if (in && in->dtype == DType::int32) return in->dtype;  // indices (gather targets) are not quantised
  if (opt.dtype) {
    if (!quantized_override(opt) || in) return *opt.dtype;
    // 8 bits or fewer: operands in the low type, outputs and intermediates in bf16; a copy of an
    // input (a relayout, exact) is stored as the input it copies.
    if (const auto* src = copied_input(d, d.find_statement(array))) return storage_dtype(d, src->name, opt);
    return DType::bf16;
  }
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
