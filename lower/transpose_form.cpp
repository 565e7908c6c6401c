// The transpose form (contract in transpose_form.hpp).
#include "lower/transpose_form.hpp"

#include <algorithm>

namespace napkin {

std::optional<TransposeForm> analyse_transpose(const Diagram& d, const KernelShape& k, const SizeMap& sizes, std::string& why) {
  if (k.statements.size() != 1) return why = "not one statement", std::nullopt;
  const Statement* st = d.find_statement(k.statements[0]);
  if (!st || st->expr->kind != Expr::Kind::ref) return why = "not a copy of one array", std::nullopt;
  const AxisList* src = d.array_axes(st->expr->name);
  if (!src || src->size() != st->axes.size() || st->axes.size() < 2) return why = "not a copy over the same axes", std::nullopt;
  AxisList a = *src, b = st->axes;
  std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
  if (a != b) return why = "not a copy over the same axes", std::nullopt;
  if (src->back() == st->axes.back()) return why = "the same innermost axis (a copy in order)", std::nullopt;
  TransposeForm f;
  f.statement = st->name, f.source = st->expr->name;
  f.in_inner = src->back(), f.out_inner = st->axes.back();
  auto extent = [&](const std::string& ax) {
    const auto it = sizes.find(ax);
    return it == sizes.end() ? std::int64_t{1} : it->second;
  };
  f.tiles_in = (extent(f.in_inner) + TransposeForm::T - 1) / TransposeForm::T;
  f.tiles_out = (extent(f.out_inner) + TransposeForm::T - 1) / TransposeForm::T;
  f.blocks = f.tiles_in * f.tiles_out;
  for (const auto& ax : st->axes)
    if (ax != f.in_inner && ax != f.out_inner) f.batch.push_back(ax), f.blocks *= extent(ax);
  f.smem_bytes = std::int64_t{TransposeForm::T} * (TransposeForm::T + 1) * 4;
  return f;
}

}  // namespace napkin
