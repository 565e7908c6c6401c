// The rows form and its launch shape (contract in rows_form.hpp).
#include "lower/rows_form.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "diagrams/graph_view.hpp"

namespace napkin {

bool elementwise_tree(const Expr& e) {
  if (e.kind == Expr::Kind::apply && !is_elementwise(e.op) && !is_positional(e.op)) return false;
  for (const auto& a : e.args)
    if (!elementwise_tree(*a)) return false;
  return true;
}

namespace {

bool is_one_axis_reduction(const Expr& e) {
  return e.kind == Expr::Kind::apply && (e.op == Op::sum || e.op == Op::max || e.op == Op::mean) && e.axes.size() == 1;
}

/** The arrays `roots` read that carry `axis`, split as the emitter reads them (emit/cuda/rows.cpp
 *  vector_path): 16-bit arrays with `axis` innermost by 16-byte vectors, the rest one element at a time. */
RowsWalk walk_of(const Diagram& d, const std::vector<const Expr*>& roots, const std::string& axis, const ModelOptions& opt) {
  std::set<std::string> vec, scalar;
  for (const auto* root : roots)
    walk(*root, [&](const Expr& n) {
      if (n.kind != Expr::Kind::ref) return;
      const AxisList* ax = d.array_axes(n.name);
      if (!ax || std::find(ax->begin(), ax->end(), axis) == ax->end()) return;
      const bool is16 = dtype_bits(storage_dtype(d, n.name, opt)) == 16;
      (is16 && ax->back() == axis ? vec : scalar).insert(n.name);
    });
  return RowsWalk{{vec.begin(), vec.end()}, {scalar.begin(), scalar.end()}, false};
}

}  // namespace

const Expr* rows_core(const Diagram& d, const Statement& st) {
  const Expr& e = *st.expr;
  if (is_normaliser(e) || (e.kind == Expr::Kind::apply && (e.op == Op::sum || e.op == Op::max || e.op == Op::mean))) return &e;
  const Expr* core = nullptr;
  bool ok = true;
  std::vector<const Expr*> outside;  // the references outside the reduction
  std::function<void(const Expr&)> visit = [&](const Expr& n) {
    if (is_one_axis_reduction(n)) {
      ok = ok && core == nullptr;
      core = &n;
      return;
    }
    if (n.kind == Expr::Kind::ref) outside.push_back(&n);
    if (n.kind == Expr::Kind::apply && !is_elementwise(n.op)) ok = false;  // a positional mask outside could name the axis
    for (const auto& a : n.args) visit(*a);
  };
  visit(e);
  if (!ok || !core) return nullptr;
  for (const auto* r : outside) {
    const AxisList* ax = d.array_axes(r->name);
    if (ax && std::find(ax->begin(), ax->end(), core->axes[0]) != ax->end()) return nullptr;
  }
  return core;
}

std::optional<RowsForm> analyse_rows(const Diagram& d, const KernelShape& k, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                     std::string& why) {
  if (k.statements.size() != 1) return why = "more than one statement", std::nullopt;
  const Statement& st = *d.find_statement(k.statements[0]);
  const Expr* core = rows_core(d, st);
  if (!core) return why = "not a normaliser or a reduction (alone, or inside an element-wise map that lacks the reduced axis)", std::nullopt;
  const Expr& e = *core;
  const bool reduction = !is_normaliser(e);
  if (reduction && e.axes.size() != 1) return why = "a reduction over more than one axis", std::nullopt;
  for (const auto& a : e.args)
    if (!elementwise_tree(*a)) return why = "the arguments are not element-wise", std::nullopt;
  RowsForm r;
  r.reduction = reduction;
  r.post = core != &*st.expr;
  if (r.post) {
    std::set<std::string> arrays;
    walk(*st.expr, [&](const Expr& n) {
      if (n.kind == Expr::Kind::ref && d.array_axes(n.name) && n.name != st.name) arrays.insert(n.name);
    });
    for (const auto& a : arrays) {
      const AxisList& ax = *d.array_axes(a);
      if (std::find(ax.begin(), ax.end(), e.axes[0]) == ax.end()) r.row_arrays.push_back(a);
    }
  }
  r.statement = st.name;
  r.axis = e.axes[0];
  r.extent = sizes.at(r.axis);
  r.rows_total = 1;
  for (const auto& a : st.axes)
    if (a != r.axis) {
      r.rows.push_back(a);
      r.rows_total *= sizes.at(a);
      r.rows_per_block *= k.plan.group(a).value_or(1);
    }
  r.warps = k.plan.warps();
  r.team_warps = r.rows_per_block >= r.warps ? 1 : (r.warps % r.rows_per_block == 0 ? r.warps / static_cast<int>(r.rows_per_block) : 1);
  r.blocks = (r.rows_total + r.rows_per_block - 1) / r.rows_per_block;
  r.statistics = walk_of(d, {&*e.args[0]}, r.axis, opt);
  std::vector<const Expr*> all;
  for (const auto& a : e.args) all.push_back(&*a);
  if (!reduction) {
    r.map = walk_of(d, all, r.axis, opt);
    r.map.stores = true;
    r.vector_output = dtype_bits(storage_dtype(d, st.name, opt)) == 16 && st.axes.back() == r.axis;
  }
  const RowsWalk& widest = reduction ? r.statistics : r.map;
  r.vector = r.extent % 8 == 0 && (!widest.vector_arrays.empty() || r.vector_output);
  if (r.team_warps == 1) {  // the fewest lanes (a power of two) whose accesses cover the row
    const std::int64_t accesses = (r.extent + (r.vector ? 7 : 0)) / (r.vector ? 8 : 1);
    while (r.team_lanes > 1 && r.team_lanes / 2 >= accesses) r.team_lanes /= 2;
  }
  // ptxas (sm_90a): one or two 16-bit arrays walked fit 48 (rmsnorm, attention's D); three
  // spilled 128 bytes at 48 and 4 at 64 (rmsnorm's backward mean(dY * W * X)), none at 80.
  const int walked = static_cast<int>(widest.vector_arrays.size());
  r.registers = 32 + (r.vector ? 4 * r.unroll * (walked <= 2 ? 1 : walked) : 0);
  r.smem_bytes = std::int64_t{r.warps} * 3 * 4;
  r.blocks_per_sm = resident_blocks_per_sm(hw, r.warps, r.registers, r.smem_bytes);
  return r;
}

int resident_blocks_per_sm(const Hardware& hw, int warps, int registers, std::int64_t smem_bytes) {
  const std::int64_t regs_per_block = std::int64_t{(registers + 7) / 8 * 8} * warps * 32;
  return static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>({hw.max_blocks_per_sm, hw.max_warps_per_sm / std::max(1, warps), hw.registers_per_sm / regs_per_block,
                                 static_cast<std::int64_t>(hw.smem.capacity_bytes) / (smem_bytes + 1024)})));
}

}  // namespace napkin
