// The rows form and its launch shape (contract in rows_form.hpp).
#include "lower/rows_form.hpp"

#include <algorithm>
#include <cmath>
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

bool is_one_axis_reduction(const Expr& e) {
  return e.kind == Expr::Kind::apply && (e.op == Op::sum || e.op == Op::max || e.op == Op::mean) && e.axes.size() == 1;
}

namespace {

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

const RowsPart* RowsForm::part(const std::string& name) const {
  for (const auto& p : parts)
    if (p.statement == name) return &p;
  return nullptr;
}

bool RowsForm::any_vector_output() const {
  return std::any_of(parts.begin(), parts.end(), [](const RowsPart& p) { return p.vector_output; });
}

namespace {

/** The arrays `e` reads (references to arrays of `d`), sorted. */
std::set<std::string> arrays_read(const Diagram& d, const Expr& e) {
  std::set<std::string> out;
  walk(e, [&](const Expr& n) {
    if (n.kind == Expr::Kind::ref && d.array_axes(n.name)) out.insert(n.name);
  });
  return out;
}

std::set<std::string> axis_set(const AxisList& a) { return {a.begin(), a.end()}; }

/** The parts of `k`'s statements, their walked axis and the rows (lower/rows_form.hpp's list),
 *  or the reason in `why`. */
bool rows_parts(const Diagram& d, const KernelShape& k, RowsForm& r, std::vector<const Expr*>& cores, std::string& why) {
  const std::set<std::string> written(k.statements.begin(), k.statements.end());
  const std::set<std::string> stored(k.outputs.begin(), k.outputs.end());
  const Statement* first_core = nullptr;
  for (const auto& name : k.statements) {
    const Statement& st = *d.find_statement(name);
    RowsPart p;
    p.statement = name;
    p.stored = stored.count(name) > 0;
    const Expr* core = rows_core(d, st);
    if (core) {
      const bool reduction = !is_normaliser(*core);
      if (reduction && core->axes.size() != 1) return why = name + ": a reduction over more than one axis", false;
      for (const auto& a : core->args)
        if (!elementwise_tree(*a)) return why = name + ": the arguments are not element-wise", false;
      p.kind = reduction ? RowsPart::Kind::reduction : RowsPart::Kind::normaliser;
      p.post = core != &*st.expr;
      if (r.axis.empty()) r.axis = core->axes[0], first_core = &st;
      if (core->axes[0] != r.axis) return why = "its statements walk different axes (" + r.axis + ", " + core->axes[0] + ")", false;
      for (const auto& a : arrays_read(d, *st.expr))  // statistics come from the first walk: nothing the kernel writes
        if (written.count(a)) return why = name + " reduces " + a + ", which the same kernel writes", false;
    } else if (elementwise_tree(*st.expr)) {
      p.kind = RowsPart::Kind::map;
    } else {
      return why = name + ": not a normaliser, a reduction (alone, or inside an element-wise map that lacks the reduced axis) or an element-wise map",
             false;
    }
    cores.push_back(core);
    r.parts.push_back(p);
  }
  if (!first_core) return why = "no normaliser or reduction", false;
  for (const auto& a : first_core->axes)
    if (a != r.axis) r.rows.push_back(a);
  std::set<std::string> row_set = axis_set(r.rows), element_set = row_set;
  element_set.insert(r.axis);
  for (std::size_t i = 0; i < r.parts.size(); ++i) {
    const RowsPart& p = r.parts[i];
    const Statement& st = *d.find_statement(p.statement);
    if (axis_set(st.axes) != (p.per_row() ? row_set : element_set))
      return why = p.statement + "'s axes are not the rows" + std::string(p.per_row() ? "" : " and " + r.axis), false;
    if (!p.per_row() && !p.stored) return why = p.statement + " is read inside the kernel", false;  // by no statement the form can feed
    if (p.kind != RowsPart::Kind::map) continue;
    for (const auto& a : arrays_read(d, *st.expr)) {
      const RowsPart* src = r.part(a);
      if (src && !src->per_row()) return why = p.statement + " reads " + a + ", a per-element output of the same kernel", false;
    }
  }
  return true;
}

/** Sets `r.staged`, `r.staged_arrays`, `r.smem_bytes` and `r.blocks_per_sm` by the rule in
 *  rows_form.hpp (RowsForm::staged); leaves `r` as it is where the rule stages nothing. */
void stage_rows(RowsForm& r, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  if (!r.vector || r.reduction || r.team_lanes != 32) return;
  std::vector<std::string> both;  // the re-read arrays both walks load by 16-byte vectors (a row-shared W[m] stays in L2)
  for (const auto& a : reread_arrays(r, d))
    if (std::count(r.statistics.vector_arrays.begin(), r.statistics.vector_arrays.end(), a) && std::count(r.map.vector_arrays.begin(), r.map.vector_arrays.end(), a))
      both.push_back(a);
  const double capacity = l2_reread_capacity(hw);
  if (both.empty() || capacity <= 0 || reread_in_flight_bytes(r, resident_teams(r, r.blocks_per_sm, hw), d, sizes, opt) <= capacity) return;
  // Little's law: the bytes per SM in flight that keep the HBM busy, and the blocks that hold them
  const double needed = hw.hbm.bandwidth_bytes_per_s * hw.loaded_latency_s() / hw.sm_count;
  const double per_block = static_cast<double>(r.threads()) * r.unroll * 16;
  const int blocks = std::clamp(static_cast<int>(std::ceil(needed / per_block)), 1, r.blocks_per_sm);
  const auto budget = static_cast<std::int64_t>(std::min(hw.smem.capacity_bytes / blocks - 1024, hw.smem_max_per_block_bytes)) - r.smem_bytes;
  const std::int64_t per_element = 2 * static_cast<std::int64_t>(both.size()) * r.teams_per_block();
  const std::int64_t staged = std::min(r.extent, budget / per_element / 8 * 8);
  if (staged <= 0) return;
  r.staged = staged;
  r.staged_arrays = both;
  r.smem_bytes += r.teams_per_block() * r.staged_bytes_per_team();
  r.blocks_per_sm = resident_blocks_per_sm(hw, r.warps, r.registers, r.smem_bytes);
}

}  // namespace

std::optional<RowsForm> analyse_rows(const Diagram& d, const KernelShape& k, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                     std::string& why) {
  RowsForm r;
  std::vector<const Expr*> cores;  // per part: the normaliser or reduction, nullptr for a map
  if (!rows_parts(d, k, r, cores, why)) return std::nullopt;
  r.reduction = std::all_of(r.parts.begin(), r.parts.end(), [](const RowsPart& p) { return p.per_row(); });
  r.extent = sizes.at(r.axis);
  r.rows_total = 1;
  for (const auto& a : r.rows) {
    r.rows_total *= sizes.at(a);
    r.rows_per_block *= k.plan.group(a).value_or(1);
  }
  r.warps = k.plan.warps();
  r.team_warps = r.rows_per_block >= r.warps ? 1 : (r.warps % r.rows_per_block == 0 ? r.warps / static_cast<int>(r.rows_per_block) : 1);
  r.blocks = (r.rows_total + r.rows_per_block - 1) / r.rows_per_block;
  std::vector<const Expr*> stats, maps;
  std::set<std::string> per_row_reads;
  for (std::size_t i = 0; i < r.parts.size(); ++i) {
    RowsPart& p = r.parts[i];
    const Statement& st = *d.find_statement(p.statement);
    if (cores[i]) stats.push_back(&*cores[i]->args[0]);
    if (p.kind == RowsPart::Kind::normaliser)
      for (const auto& a : cores[i]->args) maps.push_back(&*a);
    if (p.kind == RowsPart::Kind::map) maps.push_back(&*st.expr);
    if (!p.per_row()) p.vector_output = dtype_bits(storage_dtype(d, st.name, opt)) == 16 && st.axes.back() == r.axis;
    for (const auto& a : arrays_read(d, *st.expr)) {
      const AxisList& ax = *d.array_axes(a);
      if (std::find(ax.begin(), ax.end(), r.axis) == ax.end() && !r.part(a)) per_row_reads.insert(a);
    }
  }
  r.row_arrays.assign(per_row_reads.begin(), per_row_reads.end());
  r.statistics = walk_of(d, stats, r.axis, opt);
  if (!r.reduction) {
    r.map = walk_of(d, maps, r.axis, opt);
    r.map.stores = true;
  }
  const std::size_t walked = std::max(r.statistics.vector_arrays.size(), r.map.vector_arrays.size());
  r.vector = r.extent % 8 == 0 && (walked > 0 || r.any_vector_output());
  if (r.team_warps == 1) {  // the fewest lanes (a power of two) whose accesses in flight cover the row
    // On the vector path a lane has `unroll` 16-byte accesses in flight, so a row of 128 bf16
    // (attention's D = rowsum(dO * O) at d = 128) takes 4 lanes with 4 accesses each rather than 16
    // with one: a warp then has 8 rows' loads in flight instead of 2. At least 2 lanes there, so
    // that each access of a team is a whole 32-byte sector (CUDA C++ Best Practices Guide,
    // coalesced access to global memory).
    const std::int64_t accesses = (r.extent + (r.vector ? 7 : 0)) / (r.vector ? 8 : 1);
    const std::int64_t per_lane = r.vector ? r.unroll : 1;
    const int fewest = r.vector ? 2 : 1;
    while (r.team_lanes > fewest && std::int64_t{r.team_lanes / 2} * per_lane >= accesses) r.team_lanes /= 2;
  }
  // ptxas (sm_90a): one or two 16-bit arrays walked fit 48 (rmsnorm, attention's D); three
  // spilled 128 bytes at 48 and 4 at 64 (rmsnorm's backward mean(dY * W * X)), none at 80.
  r.registers = 32 + (r.vector ? 4 * r.unroll * (walked <= 2 ? 1 : static_cast<int>(walked)) : 0);
  r.smem_bytes = std::int64_t{r.warps} * 3 * 4;
  r.blocks_per_sm = resident_blocks_per_sm(hw, r.warps, r.registers, r.smem_bytes);
  stage_rows(r, d, sizes, hw, opt);
  return r;
}

double stored_array_bytes(const Diagram& d, const std::string& array, const SizeMap& sizes, const ModelOptions& opt) {
  double n = dtype_bits(storage_dtype(d, array, opt)) / 8.0;
  for (const auto& a : *d.array_axes(array)) n *= static_cast<double>(sizes.at(a));
  return n;
}

bool per_row_array(const RowsForm& form, const Diagram& d, const std::string& a) {
  const AxisList& ax = *d.array_axes(a);
  return std::any_of(form.rows.begin(), form.rows.end(), [&](const std::string& r) { return std::count(ax.begin(), ax.end(), r) > 0; });
}

std::vector<std::string> reread_arrays(const RowsForm& form, const Diagram& d) {
  std::vector<std::string> out;
  if (form.reduction) return out;
  auto loads = [](const RowsWalk& w) {
    std::set<std::string> s(w.vector_arrays.begin(), w.vector_arrays.end());
    s.insert(w.scalar_arrays.begin(), w.scalar_arrays.end());
    return s;
  };
  const std::set<std::string> first = loads(form.statistics), second = loads(form.map);
  for (const auto& a : first)
    if (second.count(a) && per_row_array(form, d, a)) out.push_back(a);
  return out;
}

double staged_share(const RowsForm& form, const std::string& a) {
  if (form.staged <= 0 || !std::count(form.staged_arrays.begin(), form.staged_arrays.end(), a)) return 0;
  return static_cast<double>(form.staged) / static_cast<double>(form.extent);
}

double reread_bytes(const RowsForm& form, const Diagram& d, const SizeMap& sizes, const ModelOptions& opt) {
  double b = 0;
  for (const auto& a : reread_arrays(form, d)) b += stored_array_bytes(d, a, sizes, opt) * (1.0 - staged_share(form, a));
  return b;
}

double reread_in_flight_bytes(const RowsForm& form, double resident_teams, const Diagram& d, const SizeMap& sizes, const ModelOptions& opt) {
  if (form.rows_total <= 0) return 0;
  return resident_teams * reread_bytes(form, d, sizes, opt) / static_cast<double>(form.rows_total);
}

double l2_reread_capacity(const Hardware& hw) { return hw.l2_reread_capacity_bytes > 0 ? hw.l2_reread_capacity_bytes : hw.l2.capacity_bytes; }

double resident_teams(const RowsForm& form, int blocks_per_sm, const Hardware& hw) {
  const double sms = hw.sm_count;
  const double blocks = std::min<double>(blocks_per_sm, static_cast<double>(form.blocks) / sms);
  const double teams_per_block = std::min<double>(form.teams_per_block(), static_cast<double>(form.rows_per_block));
  return std::max(1.0, sms * blocks * teams_per_block);
}

int resident_blocks_per_sm(const Hardware& hw, int warps, int registers, std::int64_t smem_bytes) {
  const std::int64_t regs_per_block = std::int64_t{(registers + 7) / 8 * 8} * warps * 32;
  return static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>({hw.max_blocks_per_sm, hw.max_warps_per_sm / std::max(1, warps), hw.registers_per_sm / regs_per_block,
                                 static_cast<std::int64_t>(hw.smem.capacity_bytes) / (smem_bytes + 1024)})));
}

}  // namespace napkin
