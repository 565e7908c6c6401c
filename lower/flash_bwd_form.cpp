// The flash-backward form (contract in flash_bwd_form.hpp). The emitter (emit/cuda/flash_bwd.cpp)
// renders what analyse_flash_bwd accepts and never declines it.
#include "lower/flash_bwd_form.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "diagrams/graph_view.hpp"
#include "diagrams/zero_band.hpp"
#include "lower/flash_form.hpp"

namespace napkin {

namespace {

bool same_set(AxisList a, AxisList b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

/** The two reference arguments of a binary contraction (over `axes` contracted axes), or false. */
bool binary_refs(const Expr& n, const Expr*& a, const Expr*& b, std::size_t axes = 1) {
  if (n.args.size() != 2 || n.axes.size() != axes) return false;
  a = &*n.args[0], b = &*n.args[1];
  return a->kind == Expr::Kind::ref && b->kind == Expr::Kind::ref;
}

/** The stream's axes, outer ones first then Q. */
AxisList stream_axes(const FlashBwdForm& f) {
  AxisList v = f.outer;
  v.push_back(f.Q);
  return v;
}

/** Reads the accumulated outputs (statements without Q) and sets f.X; false with `why`. */
bool read_outputs(const Diagram& d, const KernelShape& k, FlashBwdForm& f, const std::set<std::string>& tiles, std::string& why) {
  for (const auto& name : k.statements) {
    if (tiles.count(name) || contains(k.atomic, name)) continue;
    const Statement* s = d.find_statement(name);
    if (!contains(k.outputs, name)) return why = "'" + name + "' is neither over the stream's axis nor stored", false;
    std::vector<const Expr*> cons;
    const Expr *t = nullptr, *c = nullptr;
    const AxisList streamed = stream_axes(f);
    if (!elementwise_but_contractions(*s->expr, cons) || cons.size() != 1 || !binary_refs(*cons[0], t, c, streamed.size()) ||
        !same_set(cons[0]->axes, streamed))
      return why = "'" + name + "' is not one contraction over the stream's axes with element-wise maps", false;
    if (!tiles.count(t->name)) std::swap(t, c);
    if (!tiles.count(t->name) || tiles.count(c->name) || contains(k.statements, c->name))
      return why = "'" + name + "' does not contract a tile statement with an array", false;
    const AxisList& tile_axes = d.find_statement(t->name)->axes;
    const AxisList& ca = *d.array_axes(c->name);
    std::string x;
    for (const auto& a : tile_axes)
      if (a != f.Q && !contains(f.outer, a) && !contains(ca, a)) {
        if (!x.empty()) return why = "'" + name + "': the tile has two axes its operand " + c->name + " lacks", false;
        x = a;
      }
    if (x.empty() || (!f.X.empty() && x != f.X)) return why = "'" + name + "': no single block axis", false;
    f.X = x;
    // Beside its contraction the epilogue reads arrays from global memory only: another statement
    // of this kernel is not there yet (it is stored later, or never).
    for (const auto& r : referenced_arrays(*s->expr, d))
      if (r != t->name && r != c->name && contains(k.statements, r))
        return why = "'" + name + "' reads '" + r + "' of the same kernel outside its contraction", false;
    BwdOutput o{s, cons[0], t->name, c->name, ca.back(), 0};
    if (contains(streamed, o.e) || !contains(ca, f.Q) || contains(ca, x)) return why = c->name + " is not stored with its free axis innermost", false;
    AxisList expect;
    for (const auto& a : tile_axes)
      if (!contains(streamed, a)) expect.push_back(a);
    expect.push_back(o.e);
    if (!same_set(s->axes, expect)) return why = "'" + name + "' is not over the tile's axes and " + o.e, false;
    f.outputs.push_back(o);
  }
  if (f.outputs.empty()) return why = "no statement accumulates over " + f.Q, false;
  return true;
}

/** Whether `e` reads no array of `d`: numbers, axis sizes and the node `keep` only. */
bool constant_but(const Diagram& d, const Expr& e, const Expr* keep) {
  if (&e == keep || e.kind == Expr::Kind::number) return true;
  if (e.kind == Expr::Kind::ref) return !d.array_axes(e.name);
  if (e.kind != Expr::Kind::apply) return false;
  return std::all_of(e.args.begin(), e.args.end(), [&](const ExprPtr& a) { return constant_but(d, *a, keep); });
}

/** Reads the outputs accumulated by atomic adds (FlashBwdForm::atomics) into f.atomics, after
 *  read_outputs set f.X; marks the tiles they read atomic_staged. False with `why`. */
bool read_atomics(const Diagram& d, const KernelShape& k, FlashBwdForm& f, const std::set<std::string>& tiles, std::string& why) {
  for (const auto& name : k.atomic) {
    const Statement* s = d.find_statement(name);
    std::vector<const Expr*> cons;
    const Expr *t = nullptr, *r = nullptr;
    if (!elementwise_but_contractions(*s->expr, cons) || cons.size() != 1 || !binary_refs(*cons[0], t, r) || cons[0]->axes[0] != f.X)
      return why = "'" + name + "' (added up by atomic adds) is not one contraction over " + f.X, false;
    if (!tiles.count(t->name)) std::swap(t, r);
    if (!tiles.count(t->name) || contains(k.statements, r->name))
      return why = "'" + name + "' (added up by atomic adds) does not contract a tile statement with an array", false;
    const AxisList& ra = *d.array_axes(r->name);
    if (!contains(ra, f.X) || contains(ra, f.Q) || ra.back() == f.X || ra.back() != s->axes.back())
      return why = "'" + name + "': " + r->name + " is not over " + f.X + " with the output's innermost axis innermost", false;
    for (const auto& a : f.outer)
      if (contains(ra, a)) return why = r->name + " varies along the outer stream " + a, false;
    AxisList expect;
    for (const auto& a : d.find_statement(t->name)->axes)
      if (a != f.X) expect.push_back(a);
    expect.push_back(ra.back());
    if (!same_set(s->axes, expect)) return why = "'" + name + "' is not over the tile's axes but " + f.X + ", and " + ra.back(), false;
    if (!constant_but(d, *s->expr, cons[0])) return why = "'" + name + "' reads arrays beside its contraction", false;
    f.atomics.push_back({s, cons[0], t->name, r->name, ra.back(), 0});
    for (auto& tile : f.tiles)
      if (tile.s->name == t->name) tile.atomic_staged = true;
  }
  return true;
}

/** Reads the tile statements' contractions into f.tiles; false with `why`. */
bool read_tiles(const Diagram& d, const KernelShape& k, FlashBwdForm& f, std::string& why) {
  const AxisList& axes = f.tiles.front().s->axes;
  for (auto& t : f.tiles) {
    std::vector<const Expr*> cons;
    if (!same_set(t.s->axes, axes) || !elementwise_but_contractions(*t.s->expr, cons) || cons.size() > 1)
      return why = "'" + t.s->name + "' is not element-wise over the tile with at most one contraction", false;
    t.stored = contains(k.outputs, t.s->name);
    if (cons.empty()) continue;
    const Expr *r = nullptr, *c = nullptr;
    if (!binary_refs(*cons[0], r, c) || contains(k.statements, r->name) || contains(k.statements, c->name))
      return why = "'" + t.s->name + "': its contraction is not of two arrays", false;
    AxisList ra = *d.array_axes(r->name), ca = *d.array_axes(c->name);
    if (contains(ra, f.Q)) std::swap(r, c), std::swap(ra, ca);
    t.node = cons[0], t.resident = r->name, t.streamed = c->name, t.c = cons[0]->axes[0];
    if (!contains(ra, f.X) || contains(ra, f.Q) || !contains(ca, f.Q) || contains(ca, f.X))
      return why = "'" + t.s->name + "': its contraction does not pair an array over " + f.X + " with one over " + f.Q, false;
    for (const auto& a : f.outer)  // staged once per block, a resident tile cannot vary along the outer stream
      if (contains(ra, a)) return why = r->name + " varies along the outer stream " + a, false;
    if (ra.back() != t.c || ca.back() != t.c) return why = r->name + " and " + c->name + " are not stored with " + t.c + " innermost", false;
  }
  return true;
}

/** Adds `array` (rows along `rows`, its innermost axis whole) to f.operands once. */
bool add_operand(const Diagram& d, const KernelShape& k, FlashBwdForm& f, const std::string& array, bool streamed, std::string& why) {
  if (f.operand(array) >= 0) return f.operands[f.operand(array)].streamed == streamed || (why = array + " is staged both ways", false);
  const std::string cols = d.array_axes(array)->back();
  if (!k.axes.count(cols) || k.axes.at(cols).kind != AxisPlan::Kind::whole) return why = "the operand axis " + cols + " is not whole", false;
  f.operands.push_back({array, streamed ? f.Q : f.X, cols, k.axes.at(cols).extent, streamed});
  return true;
}

/** Sets each tile's last_reader (BwdTile). */
void find_last_readers(FlashBwdForm& f) {
  for (std::size_t i = 0; i < f.tiles.size(); ++i) {
    f.tiles[i].last_reader = i;
    for (std::size_t j = i + 1; j < f.tiles.size(); ++j)
      if (contains(f.tiles[j].reads, f.tiles[i].s->name)) f.tiles[i].last_reader = j;
  }
}

/** The most tile statements in registers at once, in the emitter's order (each tile statement
 *  computed, then the tiles it read for the last time retire: their accumulated outputs and
 *  stores): a tile lives until its last reader among the tile statements; an element-wise
 *  statement reading a tile for the last time overwrites it. */
int live_tiles(const FlashBwdForm& f) {
  const auto names = f.tile_names();
  int peak = 0;
  for (std::size_t i = 0; i < f.tiles.size(); ++i) {
    int live = 0;
    bool in_place = false;
    for (std::size_t j = 0; j <= i; ++j) {
      if (f.tiles[j].last_reader < i) continue;
      if (j < i && f.tiles[j].last_reader == i && !f.tiles[i].node && contains(f.tiles[i].reads, names[j])) in_place = true;
      ++live;
    }
    peak = std::max(peak, live - (in_place ? 1 : 0));
  }
  return peak;
}

/** The chunks of Q [first, end) the causal skip `skip` leaves out for the block of X rows [x0, x1]
 *  of `q`'s chunks: "before", those before x0; "after", those past x1 (the emitter's grid_and_chunks walks
 *  the others, kc_begin to kc_end). */
std::pair<std::int64_t, std::int64_t> skipped_chunks(const std::string& skip, const AxisPlan& q, std::int64_t TQ, std::int64_t x0, std::int64_t x1) {
  if (skip == "before") return {0, std::min(q.count, x0 / TQ)};
  return {std::min(q.count, x1 / TQ + 1), q.count};
}

}  // namespace

void flash_bwd_causal_skip(FlashBwdForm& f, const KernelShape& k) {
  f.skip.clear();
  f.active_fraction = 1;
  f.longest_fraction = 1;
  f.tile_chunks.clear();
  auto causal_mask = [&](const Expr& e) -> std::string {  // "before", "after" or ""
    if (e.kind != Expr::Kind::apply || e.op != Op::mask || e.args.size() != 2 || !is_plain_causal(*e.args[1])) return "";
    const AxisList& ax = e.args[1]->axes;
    if (ax == AxisList{f.Q, f.X}) return "before";
    if (ax == AxisList{f.X, f.Q}) return "after";
    return "";
  };
  std::set<std::string> zero;
  std::string side;
  const auto names = f.tile_names();
  for (const auto& t : f.tiles) {
    const Expr& e = *t.s->expr;
    if (!t.node && e.kind == Expr::Kind::apply && e.op == Op::exp && e.args[0]->kind == Expr::Kind::apply && e.args[0]->op == Op::sub) {
      const Expr &m = *e.args[0]->args[0], &r = *e.args[0]->args[1];
      std::string s = causal_mask(m);
      if (s.empty() && m.kind == Expr::Kind::ref && contains(names, m.name))
        s = causal_mask(*f.tiles[static_cast<std::size_t>(std::find(names.begin(), names.end(), m.name) - names.begin())].s->expr);
      if (!s.empty() && !has_mask(r) && (side.empty() || side == s)) {
        side = s;
        zero.insert(t.s->name);
        continue;
      }
    }
    std::function<bool(const Expr&)> zero_factor = [&](const Expr& x) {
      if (x.kind == Expr::Kind::ref) return zero.count(x.name) > 0;
      return x.kind == Expr::Kind::apply && x.op == Op::mul && (zero_factor(*x.args[0]) || zero_factor(*x.args[1]));
    };
    if (!t.node && zero_factor(e)) zero.insert(t.s->name);
  }
  if (side.empty()) return;
  for (const auto& o : f.outputs)
    if (!zero.count(o.tile)) return;
  for (const auto& o : f.atomics)  // a zero tile adds nothing: a skipped chunk adds nothing
    if (!zero.count(o.tile)) return;
  for (const auto& t : f.tiles)
    if (t.stored && !zero.count(t.s->name)) return;
  const AxisPlan &x = k.axes.at(f.X), &q = k.axes.at(f.Q);
  // Every row and column of the tile keeps an element of the mask: else a statistic R over the
  // empty one is -inf and the language's value there is NaN (exp(-inf + inf)), not the 0 the skip
  // writes. causal(Q, X) keeps X <= Q: columns X >= N_Q are empty; causal(X, Q), rows Q >= N_X.
  if ((side == "before" && x.extent > q.extent) || (side == "after" && q.extent > x.extent)) return;
  f.skip = side;
  double active = 0, longest = 0;
  for (std::int64_t i = 0; i < x.count; ++i) {
    const auto [first, end] = skipped_chunks(side, q, f.TQ, i * f.TX, std::min((i + 1) * f.TX, x.extent) - 1);
    const double n = static_cast<double>(q.count - (end - first));
    f.tile_chunks.push_back(q.count - (end - first));
    active += n;
    longest = std::max(longest, n);
  }
  if (side == "after") std::reverse(f.tile_chunks.begin(), f.tile_chunks.end());  // the longest first
  f.active_fraction = active / static_cast<double>(std::max<std::int64_t>(1, x.count * q.count));
  f.longest_fraction = longest / static_cast<double>(std::max<std::int64_t>(1, q.count));
}

std::pair<std::int64_t, std::int64_t> flash_bwd_zero_rows(const std::vector<ZeroReader>& r, std::int64_t x0, std::int64_t x1, std::int64_t n_q) {
  std::int64_t first = n_q, end = 0;
  for (const auto& z : r) {
    // a reader tile m walks chunk kc of X while kc < ke(m), ke(m) = (last row of m + hi) / T_K + 1
    // (unclipped: a superset): it reaches x0 from m = (x0 rounded down to a chunk - hi) / T_M on
    std::int64_t lo = 0, hi = n_q;
    if (z.hi) {
      const std::int64_t a = x0 / z.TK * z.TK - *z.hi;
      lo = a > 0 ? a / z.TM * z.TM : 0;
    }
    // ... and from kf(m) = (first row of m + lo) / T_K: it starts before x1 while m T_M + lo < xe
    if (z.lo) {
      const std::int64_t b = (x1 / z.TK + 1) * z.TK - *z.lo;
      hi = b > 0 ? std::min(n_q, (b + z.TM - 1) / z.TM * z.TM) : 0;
    }
    first = std::min(first, lo), end = std::max(end, hi);
  }
  return {first, std::max(first, end)};
}

void flash_bwd_zero_shares(FlashBwdForm& f, const KernelShape& k) {
  if (f.skip.empty()) return;
  const AxisPlan &x = k.axes.at(f.X), &q = k.axes.at(f.Q);
  for (auto& t : f.tiles) {
    t.zero_share = 1;
    if (!t.stored || t.zero_readers.empty()) continue;
    double skipped = 0, written = 0;
    for (std::int64_t i = 0; i < x.count; ++i) {
      const std::int64_t x0 = i * f.TX, x1 = std::min((i + 1) * f.TX, x.extent) - 1;
      const auto [first, end] = skipped_chunks(f.skip, q, f.TQ, x0, x1);
      const std::int64_t z_lo = std::min(q.extent, first * f.TQ), z_hi = std::min(q.extent, end * f.TQ);
      const auto [r_lo, r_hi] = flash_bwd_zero_rows(t.zero_readers, x0, x1, q.extent);
      skipped += static_cast<double>(std::max<std::int64_t>(0, z_hi - z_lo));
      written += static_cast<double>(std::max<std::int64_t>(0, std::min(z_hi, r_hi) - std::max(z_lo, r_lo)));
    }
    t.zero_share = skipped > 0 ? written / skipped : 1;
  }
}

std::vector<std::string> FlashBwdForm::tile_names() const {
  std::vector<std::string> v;
  for (const auto& t : tiles) v.push_back(t.s->name);
  return v;
}

namespace {

/** Sets f.row_vectors and f.col_vectors (FlashBwdForm) from the arrays the tiles read: not a
 *  tile or an operand, over exactly one of X and Q beside batch and outer axes; one over X and
 *  an outer axis is read in place (it varies along the stream) and is neither. */
void find_vectors(const Diagram& d, FlashBwdForm& f) {
  const auto tiles = f.tile_names();
  for (const auto& t : f.tiles)
    for (const auto& a : t.reads) {
      const auto* axes = d.array_axes(a);
      if (contains(tiles, a) || f.operand(a) >= 0 || !axes) continue;
      bool has_x = false, has_q = false, has_outer = false, other = false;
      for (const auto& ax : *axes)
        has_x |= ax == f.X, has_q |= ax == f.Q, has_outer |= contains(f.outer, ax),
            other |= ax != f.X && ax != f.Q && !contains(f.batch, ax) && !contains(f.outer, ax);
      if (other || has_x == has_q || (has_x && has_outer)) continue;
      auto& list = has_x ? f.row_vectors : f.col_vectors;
      if (!contains(list, a)) list.push_back(a);
    }
}

}  // namespace

int FlashBwdForm::operand(const std::string& array) const {
  for (std::size_t i = 0; i < operands.size(); ++i)
    if (operands[i].array == array) return static_cast<int>(i);
  return -1;
}

std::optional<FlashBwdForm> analyse_flash_bwd(const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt, std::string& why) {
  const auto streams = k.plan.streams();
  if (streams.empty() || k.plan.stream_passes() != 1) return why = "no one-pass stream", std::nullopt;
  FlashBwdForm f;
  f.Q = streams.back().first;
  f.TQ = streams.back().second;
  for (std::size_t i = 0; i + 1 < streams.size(); ++i) {
    if (streams[i].second != 1) return why = "the outer stream of " + streams[i].first + " is not in chunks of 1", std::nullopt;
    f.outer.push_back(streams[i].first);
    f.outer_steps *= k.axes.at(streams[i].first).extent;
  }
  std::set<std::string> tiles;
  for (const auto& name : k.statements) {
    const Statement* s = d.find_statement(name);
    if (!picked_axis(*s->expr).empty()) return why = "a gather (one-hot select) in '" + name + "'", std::nullopt;
    if (!contains(s->axes, f.Q) || contains(k.atomic, name)) continue;
    BwdTile t;
    t.s = s;
    t.reads = referenced_arrays(*s->expr, d);
    tiles.insert(name);
    f.tiles.push_back(t);
  }
  if (f.tiles.empty()) return why = "no statement over the streamed axis " + f.Q, std::nullopt;
  if (!read_outputs(d, k, f, tiles, why) || !read_tiles(d, k, f, why) || !read_atomics(d, k, f, tiles, why)) return std::nullopt;
  if (!k.axes.count(f.X) || k.axes.at(f.X).kind != AxisPlan::Kind::group) return why = "the block axis " + f.X + " is not grouped", std::nullopt;
  for (const auto& t : f.tiles)
    if (t.node && !add_operand(d, k, f, t.resident, false, why)) return std::nullopt;
  for (const auto& t : f.tiles)
    if (t.node && !add_operand(d, k, f, t.streamed, true, why)) return std::nullopt;
  for (auto& o : f.outputs) {
    if (!add_operand(d, k, f, o.operand, true, why)) return std::nullopt;
    o.E = k.axes.at(o.e).extent;
  }
  for (auto& o : f.atomics) {
    if (!add_operand(d, k, f, o.operand, false, why)) return std::nullopt;
    o.E = k.axes.at(o.e).extent;
  }
  for (const auto& a : f.outer)
    if (!contains(f.tiles.front().s->axes, a)) return why = "the tiles are not over the outer stream's axis " + a, std::nullopt;
  for (const auto& a : f.tiles.front().s->axes)
    if (a != f.Q && a != f.X && !contains(f.outer, a)) f.batch.push_back(a);
  find_vectors(d, f);
  f.dtype = storage_dtype(d, f.operands.front().array, opt);
  if (f.dtype != DType::bf16 && f.dtype != DType::fp16) return why = "operands are not bf16 or fp16", std::nullopt;
  for (const auto& o : f.operands)
    if (storage_dtype(d, o.array, opt) != f.dtype) return why = "operands of different dtypes", std::nullopt;
  const MmaShape* mma = hw.warp_mma(f.dtype);
  if (!mma || mma->m != 16 || mma->n != 8 || mma->k != 16) return why = "no m16n8k16 mma.sync", std::nullopt;
  for (auto& t : f.tiles) {
    const std::string& inner = t.s->axes.back();
    t.x_inner = inner == f.X;
    t.staged = t.stored && (inner == f.X || inner == f.Q) && storage_dtype(d, t.s->name, opt) == f.dtype;
  }
  f.warps = k.plan.warps();
  f.TX = *k.plan.group(f.X);
  for (auto& t : f.tiles) t.swizzled = t.staged && (t.x_inner || f.TQ % 64 == 0);
  if (f.TX % (16 * f.warps) != 0 || f.TQ % 16 != 0) return why = "T_X not a multiple of 16 x warps, or T_Q of 16", std::nullopt;
  for (const auto& o : f.operands)
    if (o.width % 16 != 0) return why = "the width of " + o.array + " is not a multiple of 16", std::nullopt;
  for (const auto& o : f.atomics)
    if (o.E % 16 != 0) return why = "the width of " + o.out->name + " is not a multiple of 16", std::nullopt;
  find_last_readers(f);
  f.live_tiles = live_tiles(f);
  flash_bwd_causal_skip(f, k);
  if (static_cast<double>(flash_bwd_smem_bytes(f)) > hw.smem_max_per_block_bytes) return why = "tiles do not fit SMEM", std::nullopt;
  if (flash_bwd_registers(f) > hw.max_registers_per_thread)
    return why = "the accumulators and tiles need " + std::to_string(flash_bwd_registers(f)) + " registers per thread", std::nullopt;
  return f;
}

std::int64_t flash_bwd_smem_bytes(const FlashBwdForm& f) {
  std::int64_t elems = 0;
  for (const auto& o : f.operands) elems += (o.streamed ? 2 * f.TQ : f.TX) * (o.width + 8);
  for (const auto& t : f.tiles) {
    if (t.staged) elems += t.x_inner ? f.TQ * (f.TX + 8) : f.TX * (f.TQ + 8);
    if (t.atomic_staged) elems += f.TX * (f.TQ + 8);
  }
  return elems * 2;
}

std::int64_t flash_bwd_wgmma_smem_bytes(const FlashBwdForm& f) {
  std::int64_t bytes = 0;
  for (const auto& o : f.operands) bytes += (o.streamed ? f.wg_stages * f.TQ : f.TX) * o.width * 2;
  for (const auto& t : f.tiles)
    if (t.staged) bytes += (t.swizzled ? f.TX * f.TQ : t.x_inner ? f.TQ * (f.TX + 8) : f.TX * (f.TQ + 8)) * 2;
  bytes += f.wg_stages * f.TQ * 4 * static_cast<std::int64_t>(f.col_vectors.size());
  return (bytes + 7) / 8 * 8 + (1 + 2 * f.wg_stages) * 8 + 1024;
}

bool flash_bwd_wgmma_fits(const FlashBwdForm& f, const Diagram& d, const Hardware& hw, std::string& why) {
  if (!hw.wgmma || !hw.tma) return why = hw.name + " has no wgmma and TMA", false;
  if (!hw.warpgroup_mma(f.dtype)) return why = "no warpgroup MMA for " + std::string(dtype_name(f.dtype)), false;
  if (!f.atomics.empty()) return why = "'" + f.atomics.front().out->name + "' is added up by atomic adds, which only the mma.sync path renders", false;
  if ((f.warps != 4 && f.warps != 8) || f.TX != 16 * f.warps) return why = "T_X not 64 rows per consumer warpgroup (4 or 8 warps)", false;
  if (f.TQ % 16 != 0 || f.TQ > 256) return why = "T_Q not a multiple of 16 up to 256", false;
  for (const auto& o : f.operands)
    if (o.width % 64 != 0) return why = "the width of " + o.array + " is not a multiple of 64 (whole 128-byte swizzle rows)", false;
  for (const auto& o : f.outputs)
    if (o.E > 256) return why = "the width of " + o.out->name + " is over 256 (wgmma's N)", false;
  for (const auto& o : f.operands)
    if (d.array_axes(o.array)->size() > 5) return why = o.array + " has more than 5 axes (TMA's limit)", false;
  if (flash_bwd_registers(f) > 240)
    return why = "the accumulators and tiles need " + std::to_string(flash_bwd_registers(f)) + " registers per thread, over a consumer's 240", false;
  if (static_cast<double>(flash_bwd_wgmma_smem_bytes(f)) > hw.smem_max_per_block_bytes) return why = "the tiles and two stages of the streamed chunks do not fit SMEM", false;
  return true;
}

int flash_bwd_registers(const FlashBwdForm& f) {
  const std::int64_t mt = f.TX / (16 * f.warps);
  const std::int64_t tile = mt * (f.TQ / 8) * 4;
  std::int64_t item = 0;  // an atomic output's item is computed once its tile has retired (emit/cuda/flash_bwd.cpp)
  for (const auto& o : f.atomics) item = std::max(item, FlashBwdForm::atomic_cols(o.E) / 2);
  std::int64_t regs = 40 + mt * 4 + std::max(f.live_tiles * tile, (f.live_tiles - 1) * tile + item);
  for (const auto& o : f.outputs) regs += mt * (o.E / 8) * 4;
  return static_cast<int>(regs);
}

}  // namespace napkin
