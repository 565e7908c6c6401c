// Strategy rows: statements over the same rows walking one axis `a` (lower/rows_form.hpp):
// normalisers `Y = norm(args; a)` (softmax, layernorm, rmsnorm), reductions `R = red(arg; a)`
// (sum, max, mean, alone or inside an element-wise map lacking `a`) and element-wise maps over the
// row that may read the kernel's reductions. Contract: see strategies.hpp. Rows (every other axis)
// are grouped ROWS per block; a team of TEAM_WARPS warps (WARPS / ROWS, at least 1), or of
// TEAM_LANES lanes where a row needs fewer than a warp's accesses, walks each row with coalesced
// accesses, keeping per-thread statistics for every lemma (online max and sum for softmax; count,
// sum and sum of squares for the norms, shifted by the row's first element for layernorm; a
// running sum or max for a reduction) that warp shuffles (and SMEM across warps) combine; one lane
// stores each reduction's value, and a second walk (none where every statement is a reduction)
// writes the per-element outputs, taking the row's chunks last first (what the first walk loaded
// last is likeliest still in L2: perfmodel/rows_cost.hpp), and reading the row's first STAGED
// elements from the SMEM where the first walk kept them (RowsForm::staged, dynamic SMEM per team).
// On the vector path loads and stores carry an L2 eviction priority (movers.cuh): evict_last on what
// the map walk will re-read from global memory (reread_arrays), evict_first on everything touched
// once, so that the re-read competes in L2 only with itself (perfmodel/rows_cost.hpp); the scalar
// path keeps the default policy.
// Where the axis is innermost and contiguous (16-bit arrays,
// N % 8 == 0, 16-byte aligned pointers: checked at run time), each thread moves 8 elements per
// coalesced 16-byte access and has U = 4 of them in flight, so the HBM latency is covered by few warps.
#include <algorithm>
#include <memory>
#include <set>

#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

/** One rows kernel being rendered: its form, the walked axis, the arrays read (and the outputs
 *  written) 8 elements at a time on the vector path, and the device code. */
struct RowsKernel {
  Context& c;
  const RowsForm& form;
  std::string ax;
  std::set<std::string> vec_arrays, vec_outs;
  bool has_vec = false;
  Code& k;
  std::set<std::string> staged;  ///< arrays whose first STAGED elements of a row the team keeps in SMEM (RowsForm::staged)
  std::set<std::string> reread;  ///< per-row arrays both walks load from global memory: evict_last on the first load, evict_first on the re-read
  std::set<std::string> once;    ///< per-row arrays loaded once: evict_first
};

/** What a walk does with the staged prefix of a row (RowsForm::staged): nothing, keeps it in SMEM
 *  as it loads it (the statistics walk), or reads it from there (the map walk). Each thread keeps
 *  and reads the same 16-byte vectors (both walks give a thread the same elements of every chunk),
 *  so no barrier orders them. */
enum class Stage { none, keep, read };

/** One store of a walk: the output and its value (an expression over what the walk's body defined). */
struct RowStore {
  std::string out, value;
};

/** The vector path's arrays as lowering found them (lower/rows_form.hpp: 16-bit arrays walked with
 *  `ax` innermost, and the per-element outputs whose innermost axis is `ax`); emits `vec`, the
 *  run-time condition of the 16-byte path (N % 8 == 0, pointers 16-byte aligned), where there are any. */
void vector_path(RowsKernel& r) {
  // Reference mode (the GPU's fp32 check, not priced) stores every array in fp32: no 16-byte path.
  if (r.c.options().reference) return;
  for (const auto* w : {&r.form.statistics, &r.form.map}) r.vec_arrays.insert(w->vector_arrays.begin(), w->vector_arrays.end());
  for (const auto& p : r.form.parts)
    if (p.vector_output) r.vec_outs.insert(p.statement);
  r.has_vec = !r.vec_arrays.empty() || !r.vec_outs.empty();
  if (!r.has_vec) return;
  // what the map walk re-reads from global memory (lower/rows_form.hpp reread_arrays); every
  // other array with a row axis is loaded once (an array without one, W[m], is every row's)
  const std::vector<std::string> reread = reread_arrays(r.form, r.c.diagram());
  for (const auto& arr : r.vec_arrays) {
    if (std::count(reread.begin(), reread.end(), arr)) r.reread.insert(arr);
    else if (per_row_array(r.form, r.c.diagram(), arr)) r.once.insert(arr);
  }
  r.k.line("const uint64_t keep_l2 = napkin::l2_evict_last(), pass_l2 = napkin::l2_evict_first();  // L2 policies: the re-read waits in L2, the rest leaves first");
  std::string cond = "N_" + r.ax + " % 8 == 0";
  for (const auto& arr : r.vec_arrays) cond += " && reinterpret_cast<uintptr_t>(a." + arr + ") % 16 == 0";
  for (const auto& out : r.vec_outs) cond += " && reinterpret_cast<uintptr_t>(a." + out + ") % 16 == 0";
  r.k.line("const bool vec = " + cond + ";  // the 16-byte path");
}

/** The 16-byte store of output `out`'s 8 values `out_reg[0..7]` at the access starting b0 + u * TEAM * 8. */
void store_vector(RowsKernel& r, const std::string& out) {
  const std::string T = r.c.ctype_of(out);
  auto pack = [&](int j) { return "napkin::pack2<" + T + ">(" + out + "_reg[" + std::to_string(j) + "], " + out + "_reg[" + std::to_string(j + 1) + "])"; };
  r.k.line("napkin::st16_policy(a." + out + " + " + r.c.index(out) + ", make_uint4(" + pack(0) + ", " + pack(2) + ", " + pack(4) + ", " + pack(6) +
           "), pass_l2);  // written once: evict_first");
}

/** The 16-byte load of `arr` at i_<ax> from global memory in a walk that does `stage` with the
 *  staged prefix, under its L2 policy: a re-read array evict_last where the statistics walk loads
 *  it for the map walk (past the staged prefix), evict_first where the map walk re-reads it; any
 *  other per-row array evict_first; an array every row shares (W[m]) the default. */
std::string global_load(const RowsKernel& r, const std::string& arr, Stage stage) {
  const std::string at = "a." + arr + " + " + r.c.index(arr);
  if (r.reread.count(arr) && stage != Stage::read)
    return "napkin::ld16_policy(" + at + (r.staged.count(arr) ? ", i_" + r.ax + " < STAGED ? pass_l2 : keep_l2)" : ", keep_l2)");
  if (r.reread.count(arr) || r.once.count(arr)) return "napkin::ld16_policy(" + at + ", pass_l2)";
  return "*reinterpret_cast<const uint4*>(" + at + ")";
}

/** One walk of the team over the row: `body(over)` emits the work at element i_<ax> (its loads
 *  rendered through `over`), then each of `stores` is written. On the vector path each thread
 *  takes 8 elements per 16-byte access, U accesses in flight; else one element per step.
 *  `from_end`: the walk takes the row's chunks (a team's accesses in flight, TEAM x 8 x U
 *  elements, or TEAM scalars) last first, so the map walk re-reads first what the statistics
 *  walk loaded last, the lines the L2 is likeliest still to hold (perfmodel/rows_cost.hpp). */
void walk_row(RowsKernel& r, const std::vector<const Expr*>& roots, const std::function<void(const NodeOverride&)>& body, const std::vector<RowStore>& stores,
              bool from_end, Stage stage, const std::function<void(const NodeOverride&)>& group = {}) {
  Code& k = r.k;
  const std::string& ax = r.ax;
  std::set<std::string> used;  // the vector arrays this walk reads
  for (const auto* root : roots)
    walk(*root, [&](const Expr& n) {
      if (n.kind == Expr::Kind::ref && r.vec_arrays.count(n.name)) used.insert(n.name);
    });
  auto scalar_store = [&](const RowStore& s) {
    k.line("a." + s.out + "[" + r.c.index(s.out) + "] = napkin::from_f<" + r.c.ctype_of(s.out) + ">(" + s.value + ");");
  };
  auto scalar = [&] {
    if (from_end) {
      k.line("const int64_t chunks = (N_" + ax + " + TEAM - 1) / TEAM;  // the walk from the row's end, TEAM elements a chunk");
      k.open("for (int64_t q = 0; q < chunks; ++q)");
      k.line("const int64_t i_" + ax + " = (chunks - 1 - q) * TEAM + t;");
      k.line("if (i_" + ax + " >= N_" + ax + ") continue;");
    } else {
      k.open("for (int64_t i_" + ax + " = t; i_" + ax + " < N_" + ax + "; i_" + ax + " += TEAM)");
    }
    body({});
    for (const auto& s : stores) scalar_store(s);
    k.close();
  };
  if (!r.has_vec) return scalar();
  const NodeOverride over_vec = [&](const Expr& n) -> std::optional<std::string> {
    if (n.kind == Expr::Kind::ref && r.vec_arrays.count(n.name))
      return "napkin::to_f(reinterpret_cast<const " + r.c.ctype_of(n.name) + "*>(&" + n.name + "_reg[u])[j])";
    return std::nullopt;
  };
  k.open("if (vec)");
  if (from_end) {
    k.line("const int64_t chunks = (N_" + ax + " + int64_t{TEAM} * 8 * U - 1) / (int64_t{TEAM} * 8 * U);  // the walk from the row's end, TEAM x 8 x U elements a chunk");
    k.open("for (int64_t q = 0; q < chunks; ++q)");
    k.line("const int64_t b0 = (chunks - 1 - q) * (int64_t{TEAM} * 8 * U) + int64_t{t} * 8;");
  } else {
    k.open("for (int64_t b0 = int64_t{t} * 8; b0 < N_" + ax + "; b0 += int64_t{TEAM} * 8 * U)");
  }
  for (const auto& arr : used) k.line("uint4 " + arr + "_reg[U] = {};  // registers: U 16-byte vectors of " + arr);
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8;");
  k.line("if (i_" + ax + " >= N_" + ax + ") break;");
  for (const auto& arr : used) {
    const std::string global = global_load(r, arr, stage);
    if (stage == Stage::read && r.staged.count(arr)) k.line(arr + "_reg[u] = i_" + ax + " < STAGED ? " + arr + "_smem[i_" + ax + " / 8] : " + global + ";");
    else k.line(arr + "_reg[u] = " + global + ";");
  }
  k.close();
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("if (b0 + int64_t{u} * TEAM * 8 >= N_" + ax + ") break;");
  if (stage == Stage::keep)  // after every load of the round is issued: a store waits for its load
    for (const auto& arr : used)
      if (r.staged.count(arr)) k.line("if (b0 + int64_t{u} * TEAM * 8 < STAGED) " + arr + "_smem[(b0 + int64_t{u} * TEAM * 8) / 8] = " + arr + "_reg[u];");
  for (const auto& s : stores)
    if (r.vec_outs.count(s.out)) k.line("float " + s.out + "_reg[8];");
  if (group) {  // the 8 elements of the access at once (their loads rendered through over_vec, j bound by the callee)
    NAPKIN_ASSERT(stores.empty()) << "a walk with a per-access body stores nothing";
    group(over_vec);
  } else {
    k.line("#pragma unroll");
    k.open("for (int j = 0; j < 8; ++j)");
    k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8 + j;");
    k.line("(void)i_" + ax + ";");
    body(over_vec);
    for (const auto& s : stores) {
      if (r.vec_outs.count(s.out)) k.line(s.out + "_reg[j] = " + s.value + ";");
      else scalar_store(s);
    }
    k.close();
  }
  bool vector_stores = false;
  for (const auto& s : stores) vector_stores = vector_stores || r.vec_outs.count(s.out) > 0;
  if (vector_stores) k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8;");
  for (const auto& s : stores)
    if (r.vec_outs.count(s.out)) store_vector(r, s.out);
  k.close();
  k.close();
  k.close(" else {");
  ++k.indent;
  scalar();
  k.close();
}

/** A part of the kernel with its statement, its lemma (none for a map) and the lemma's core. */
struct RowsItem {
  const RowsPart& part;
  const Statement& st;
  const Expr* core = nullptr;
  std::unique_ptr<RowsLemma> lemma;
};

/** The value a reduction part stores: the lemma's, or the statement's element-wise map of it
 *  (RowsPart::post). */
std::string reduction_value(Context& c, const RowsItem& it) {
  if (!it.part.post) return it.lemma->map();
  return c.value(*it.st.expr, [&](const Expr& n) -> std::optional<std::string> {
    if (&n == it.core) return "(" + it.lemma->map() + ")";
    return std::nullopt;
  });
}

/** The body of a row: every lemma's statistics over a first walk, merged and finalised; each
 *  reduction's value stored by the team's first lane (where the kernel's maps read it, also kept per
 *  row as `<name>_row`, rounded to its dtype where it is stored, as a later kernel reads it); then a second
 *  walk applying the normalisers' and the maps' expressions and storing their outputs (rows past
 *  the last are dropped only after the merge, which every thread of the team joins). */
void row_body(RowsKernel& r, std::vector<RowsItem>& items) {
  std::set<std::string> row_values;  // reductions the kernel's maps read, kept in registers per row
  for (const auto& it : items)
    if (it.part.kind == RowsPart::Kind::map)
      walk(*it.st.expr, [&](const Expr& n) {
        if (n.kind == Expr::Kind::ref && r.form.part(n.name) && r.form.part(n.name)->per_row()) row_values.insert(n.name);
      });
  std::vector<const Expr*> stat_roots;
  for (const auto& it : items) {
    if (!it.lemma) continue;
    it.lemma->init(r.k);
    stat_roots.push_back(&*it.core->args[0]);
  }
  walk_row(r, stat_roots, [&](const NodeOverride& over) {
    for (const auto& it : items) {
      if (!it.lemma) continue;
      r.k.line("const float " + it.lemma->var("v") + " = " + r.c.value(*it.core->args[0], over) + ";");
      it.lemma->update(r.k);
    }
  }, {}, false, Stage::keep, [&](const NodeOverride& over) {  // the vector path: each lemma's update over an access's 8 values
    for (const auto& it : items) {
      if (!it.lemma) continue;
      const std::string vg = it.lemma->var("vg");
      r.k.line("float " + vg + "[8];  // registers: the lemma's argument at the access's 8 elements");
      r.k.line("#pragma unroll");
      r.k.open("for (int j = 0; j < 8; ++j)");
      r.k.line("const int64_t i_" + r.ax + " = b0 + int64_t{u} * TEAM * 8 + j;");
      r.k.line("(void)i_" + r.ax + ";");
      r.k.line(vg + "[j] = " + r.c.value(*it.core->args[0], over) + ";");
      r.k.close();
      it.lemma->update_group(r.k);
    }
  });
  for (const auto& it : items)
    if (it.lemma) it.lemma->merge(r.k);
  for (const auto& it : items) {
    if (!it.part.per_row()) continue;
    const std::string& name = it.st.name;
    const std::string T = r.c.ctype_of(name);
    const std::string store = "if (live && t == 0) a." + name + "[" + r.c.index(name) + "] = napkin::from_f<" + T + ">(";
    if (!row_values.count(name)) {  // stored only (a reduction no map of this kernel reads is stored: an output)
      r.k.line(store + reduction_value(r.c, it) + ");");
      continue;
    }
    // a stored value as the kernels after this one read it (rounded to its dtype); else as computed
    const std::string value = it.part.stored ? "napkin::round_to<" + T + ">(" + reduction_value(r.c, it) + ")" : reduction_value(r.c, it);
    r.k.line("const float " + name + "_row = " + value + ";  // registers: " + name + " of this row");
    if (it.part.stored) r.k.line(store + name + "_row);");
  }
  if (r.form.reduction) return;
  for (const auto& it : items)
    if (it.lemma && !it.part.per_row()) it.lemma->finalise(r.k);
  r.k.line("if (!live) continue;");
  std::vector<const Expr*> roots;
  std::vector<RowStore> stores;
  for (const auto& it : items) {
    if (it.part.kind == RowsPart::Kind::normaliser) {
      for (const auto& arg : it.core->args) roots.push_back(&*arg);
      stores.push_back({it.st.name, it.lemma->map()});
    } else if (it.part.kind == RowsPart::Kind::map) {
      roots.push_back(&*it.st.expr);
    }
  }
  walk_row(r, roots, [&](const NodeOverride& over) {
    const NodeOverride over_rows = [&](const Expr& n) -> std::optional<std::string> {
      if (n.kind == Expr::Kind::ref && row_values.count(n.name)) return n.name + "_row";
      return over ? over(n) : std::nullopt;
    };
    for (auto& it : items) {
      if (it.part.kind == RowsPart::Kind::normaliser) {
        const auto& args = it.core->args;
        r.k.line("const float " + it.lemma->var("v") + " = " + r.c.value(*args[0], over) + ";");
        if (args.size() > 1) r.k.line("const float " + it.lemma->var("w") + " = " + r.c.value(*args[1], over) + ";");
        if (args.size() > 2) r.k.line("const float " + it.lemma->var("bias") + " = " + r.c.value(*args[2], over) + ";");
      } else if (it.part.kind == RowsPart::Kind::map) {
        r.k.line("const float " + it.st.name + "_val = " + r.c.value(*it.st.expr, over_rows) + ";");
      }
    }
  }, [&] {
    for (const auto& it : items)
      if (it.part.kind == RowsPart::Kind::map) stores.push_back({it.st.name, it.st.name + "_val"});
    return stores;
  }(), true, Stage::read);
}

}  // namespace

KernelEmit emit_rows(Context& c, const KernelChoice& kc) {
  const Diagram& d = c.diagram();
  const KernelSpec& spec = *kc.cost.spec;
  NAPKIN_ASSERT(spec.rows.has_value()) << "rows kernel " << kc.plan.name << " has no rows form";
  const RowsForm& form = *spec.rows;  // lowering's launch shape (lower/rows_form.hpp): rows per block, teams, unroll, occupancy
  std::vector<RowsItem> items;
  for (const auto& p : form.parts) {
    const Statement& st = *d.find_statement(p.statement);
    const Expr* core = p.kind == RowsPart::Kind::map ? nullptr : rows_core(d, st);  // the normaliser or reduction
    const std::string tag = form.parts.size() == 1 ? "" : "_" + st.name;
    items.push_back({p, st, core, core ? std::make_unique<RowsLemma>(c, *core, tag) : nullptr});
  }
  std::string ops;
  for (const auto& it : items) ops += (ops.empty() ? "" : " + ") + std::string(it.core ? op_name(it.core->op) : "map " + it.st.name);
  const bool post = items.size() == 1 && items[0].part.post;
  const std::string& ax = form.axis;
  const AxisList& rows = form.rows;
  const std::int64_t R = form.rows_per_block;
  const int warps = form.warps;
  const int team = form.team_warps;
  const std::string ns = kernel_ns(kc.plan.name);
  Code k;
  k.line(describe_plan(kc.plan));
  const std::string per_row = form.team_lanes < 32 ? std::to_string(form.team_lanes) + " lanes" : std::to_string(team) + " warp(s)";
  k.line("// strategy rows: " + ops + " along " + ax + "; " + std::to_string(R) + " rows per block, " + per_row + " per row; " +
         (form.reduction ? std::string("one pass, the team's first lane stores the value") + (post ? " through the statement's element-wise map" : "")
                         : std::string("pass 1 statistics, pass 2 the map from the row's end (its re-read comes from L2 where the rows in flight fit there, else in part from HBM: perfmodel/rows_cost.hpp)")));
  k.open("namespace " + ns);
  k.line("constexpr int WARPS = " + std::to_string(warps) + ", THREADS = WARPS * 32, ROWS = " + std::to_string(R) + ", TEAM_WARPS = " + std::to_string(team) +
         ", TEAM_LANES = " + std::to_string(form.team_lanes) + ", TEAM = TEAM_WARPS * TEAM_LANES;");
  k.line("constexpr int TEAMS_PER_WARP = 32 / TEAM_LANES, TEAMS = WARPS / TEAM_WARPS * TEAMS_PER_WARP;  // teams of a block, rows walked at once");
  k.line("[[maybe_unused]] constexpr int U = " + std::to_string(form.unroll) + ";  // 16-byte accesses in flight per lane (the vector path)");
  // Reference mode (the fp32 check) has no vector path, so nothing to stage.
  const bool staging = form.staged > 0 && !c.options().reference;
  if (staging) {
    k.line("constexpr int64_t STAGED = " + std::to_string(form.staged) + ";  // elements of a row kept in SMEM by the statistics walk for the map walk (lower/rows_form.hpp)");
    k.line("constexpr size_t SMEM_BYTES = size_t{TEAMS} * " + std::to_string(form.staged_arrays.size()) + " * STAGED * 2;  // dynamic SMEM: each team's staged rows");
  }
  open_bounded_kernel(k, c, form.registers, form.blocks_per_sm, "lower/rows_form.hpp");
  k.line("__shared__ float stats_smem[WARPS][3];  // SMEM: each warp's statistics, merged across a team");
  if (staging) {
    k.line("extern __shared__ uint4 stage_smem[];  // SMEM: per team, the first STAGED elements of its row of every staged array");
    for (std::size_t i = 0; i < form.staged_arrays.size(); ++i)
      k.line("uint4* const " + form.staged_arrays[i] + "_smem = stage_smem + (int64_t{threadIdx.x / 32 / TEAM_WARPS} * " + std::to_string(form.staged_arrays.size()) +
             " + " + std::to_string(i) + ") * (STAGED / 8);  // this team's staged " + form.staged_arrays[i]);
  }
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = (warp % TEAM_WARPS) * 32 + lane % TEAM_LANES;");
  std::string total = "int64_t{1}";
  for (const auto& r : rows) total += " * N_" + r;
  k.line("const int64_t total_rows = " + total + ";");
  k.line("// every lane of a warp runs the same iterations (the shuffles name the whole warp); a team past the rows walks row 0 and stores nothing");
  k.open("for (int rr0 = warp / TEAM_WARPS * TEAMS_PER_WARP; rr0 < ROWS; rr0 += TEAMS)");
  k.line("const int rr = rr0 + lane / TEAM_LANES;");
  k.line("int64_t row = int64_t{blockIdx.x} * ROWS + rr;");
  k.line("const bool live = rr < ROWS && row < total_rows;");
  k.line("if (TEAM_WARPS == 1 && !__any_sync(0xffffffffu, live)) break;");
  k.line("if (!live) row = 0;");
  decompose(k, "row", rows);
  RowsKernel rk{c, form, ax, {}, {}, false, k, {}, {}, {}};
  if (staging) rk.staged.insert(form.staged_arrays.begin(), form.staged_arrays.end());
  vector_path(rk);
  row_body(rk, items);
  k.close();
  --k.indent;
  k.line("}");
  k.close("  // namespace " + ns);
  KernelEmit r;
  r.strategy = "rows";
  for (const auto& p : form.parts)
    if (p.stored) r.stored.insert(p.statement);
  r.device_code = k.text;
  Code l;
  rows_launch(l, rows, R, ns, staging);
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
