// The flash form and the checks of its two variants (contract in flash_form.hpp). The emitter
// (emit/cuda/flash.cpp) renders what these functions accept and never declines it.
#include "lower/flash_form.hpp"

#include <algorithm>
#include <functional>

#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"
#include "lower/flash_scale.hpp"
#include "lower/gemm_form.hpp"

namespace napkin {

bool elementwise_but_contractions(const Expr& e, std::vector<const Expr*>& cons) {
  bool ok = true;
  walk(e, [&](const Expr& n) {
    if (n.kind != Expr::Kind::apply) return;
    if (n.op == Op::contract) cons.push_back(&n);
    else if (!is_elementwise(n.op) && !is_positional(n.op)) ok = false;
  });
  return ok;
}

namespace {

bool is_stat(const FlashForm& f, const Statement* st) { return std::find(f.stats.begin(), f.stats.end(), st) != f.stats.end(); }

const Statement* kernel_statement(const Diagram& d, const KernelShape& k, const std::string& name) {
  return contains(k.statements, name) ? d.find_statement(name) : nullptr;
}

/** The chain S -> ... -> P -> O of `k`: O the one stored statement, one contraction over x of
 *  P (a kernel statement) with an array; P a softmax along x of a score map, or the score map
 *  itself (no normaliser); every other statement element-wise over the score's axes, one of them
 *  holding the first contraction. Fills f's statements, nodes, score and axes x, Qn, Kn, Vn. */
bool find_chain(const Diagram& d, const KernelShape& k, FlashForm& f, std::string& why) {
  std::vector<std::string> contracting;  // stored statements holding a contraction: O alone
  for (const auto& o : k.outputs) {
    std::vector<const Expr*> c;
    elementwise_but_contractions(*d.find_statement(o)->expr, c);
    if (!c.empty()) contracting.push_back(o);
  }
  if (contracting.empty()) return why = "the kernel stores no contraction", false;
  if (contracting.size() > 1)
    return why = "the kernel stores " + std::to_string(contracting.size()) + " contractions (the flash form stores its last contraction, and the softmax's row statistics)", false;
  f.O = d.find_statement(contracting[0]);
  std::vector<const Expr*> cons;
  if (!elementwise_but_contractions(*f.O->expr, cons) || cons.size() != 1 || cons[0]->args.size() != 2 || cons[0]->axes.size() != 1)
    return why = "the stored statement is not one contraction with element-wise maps", false;
  f.co = cons[0];
  f.x = f.co->axes[0];
  const Expr *pa = &*f.co->args[0], *va = &*f.co->args[1];
  if (pa->kind == Expr::Kind::ref && va->kind == Expr::Kind::ref && kernel_statement(d, k, va->name)) std::swap(pa, va);
  if (pa->kind != Expr::Kind::ref || va->kind != Expr::Kind::ref || !kernel_statement(d, k, pa->name) || kernel_statement(d, k, va->name))
    return why = "the last contraction does not read a fused statement and an array", false;
  f.P = kernel_statement(d, k, pa->name);
  f.Vn = va->name;
  const Expr& pe = *f.P->expr;
  const bool normaliser = is_normaliser(pe);
  if (normaliser && (pe.op != Op::softmax || pe.axes != AxisList{f.x} || pe.args.size() != 1))
    return why = "the normaliser before the last contraction is not a softmax along " + f.x + " (the flash form renders online-softmax only)", false;
  f.normaliser_lemma = normaliser ? "online-softmax" : "";
  f.score = normaliser ? &*pe.args[0] : &pe;
  // Every fused statement but O is element-wise over the score's axes; one contraction in all.
  cons.clear();
  AxisList rows;  // P's axes but x: the axes of a row statistic
  for (const auto& a : f.P->axes)
    if (a != f.x) rows.push_back(a);
  for (const auto& name : k.statements) {
    const Statement* st = d.find_statement(name);
    if (st == f.O) continue;
    if (normaliser && st->axes.size() == rows.size() && std::is_permutation(st->axes.begin(), st->axes.end(), rows.begin())) {
      f.stats.push_back(st);  // checked below, once the score is known
      continue;
    }
    const Expr& e = st == f.P ? *f.score : *st->expr;
    const std::size_t before = cons.size();
    if (!elementwise_but_contractions(e, cons) || st->axes.size() != f.P->axes.size() || !std::is_permutation(st->axes.begin(), st->axes.end(), f.P->axes.begin()))
      return why = "'" + name + "' is not element-wise over the score's axes", false;
    if (cons.size() > before) f.S = st;
    if (st != f.P) f.inlined.push_back(name);
  }
  if (cons.size() != 1 || cons[0]->args.size() != 2 || cons[0]->axes.size() != 1) return why = "the score is not one contraction with element-wise maps", false;
  f.cs = cons[0];
  f.inlined.push_back(f.P->name);
  const Expr &q_ref = *f.cs->args[0], &k_ref = *f.cs->args[1];
  if (q_ref.kind != Expr::Kind::ref || k_ref.kind != Expr::Kind::ref || kernel_statement(d, k, q_ref.name) || kernel_statement(d, k, k_ref.name))
    return why = "the first contraction's operands are not arrays", false;
  f.Qn = q_ref.name, f.Kn = k_ref.name;
  find_flash_scale(d, f);
  for (const Statement* st : f.stats) {
    bool ok = true;
    std::function<void(const Expr&)> visit = [&](const Expr& n) {
      if (n.kind == Expr::Kind::apply && (n.op == Op::max || n.op == Op::sum)) {
        ok = ok && flash_statistic(d, f, n) != 0;
        return;
      }
      if (n.kind == Expr::Kind::ref && !(kernel_statement(d, k, n.name) && is_stat(f, d.find_statement(n.name)))) ok = false;
      if (n.kind == Expr::Kind::apply && !is_elementwise(n.op)) ok = false;
      for (const auto& a : n.args) visit(*a);
    };
    visit(*st->expr);
    if (!ok)
      return why = "'" + st->name + "' is over the rows of the softmax but is not an element-wise map of its running max and sum (max(A; " + f.x +
                   "), sum(exp(A - M); " + f.x + "))",
             false;
  }
  for (const auto& o : k.outputs)
    if (o != f.O->name && !is_stat(f, d.find_statement(o))) return why = "the kernel stores '" + o + "', neither the last contraction nor a row statistic", false;
  return true;
}

}  // namespace

std::optional<FlashForm> analyse_flash(const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt, std::string& why) {
  auto streams = k.plan.streams();
  if (streams.size() > 1 || k.plan.stream_passes() != 1) return why = "more than one stream, or a two-pass stream", std::nullopt;
  for (const auto& name : k.statements)
    if (const std::string v = picked_axis(*d.find_statement(name)->expr); !v.empty())
      return why = "a gather along " + v + " (its one-hot select): the flash form renders no select on its score tiles", std::nullopt;
  FlashForm f;
  if (!find_chain(d, k, f, why)) return std::nullopt;
  const std::string& x = f.x;
  // x is the last contraction's axis: streamed by the schedule, or kept whole and walked in chunks of 64.
  if (!streams.empty() && streams[0].first != x) return why = "the streamed axis is not the last contraction's", std::nullopt;
  if (streams.empty() && (!k.axes.count(x) || k.axes.at(x).kind != AxisPlan::Kind::whole)) return why = "the last contraction's axis is grouped", std::nullopt;
  f.TX = streams.empty() ? 64 : streams[0].second;
  f.x_note = streams.empty() ? "kept whole in the schedule, walked in chunks of 64" : "streamed by " + std::to_string(f.TX);
  f.dk = f.cs->axes[0];
  AxisList qa = *d.array_axes(f.Qn), ka = *d.array_axes(f.Kn);
  const AxisList va = *d.array_axes(f.Vn);
  if (contains(qa, x)) std::swap(f.Qn, f.Kn), std::swap(qa, ka);
  for (const auto& dir : k.plan.directives)
    if (dir.kind == Directive::Kind::group && f.M.empty() && contains(qa, dir.names[0]) && !contains(ka, dir.names[0])) f.M = dir.names[0];
  if (f.M.empty() || !contains(ka, x) || !contains(f.P->axes, f.M)) return why = "no grouped query axis", std::nullopt;
  // The value dimension: V's innermost axis other than x. Where V stores x innermost (V[.., dv, x])
  // O += P V reads V K-major, which 8-bit wgmma needs and the 16-bit paths do not read.
  if (!contains(va, x)) return why = "V does not hold the last contraction's axis", std::nullopt;
  f.v_x_inner = va.back() == x;
  f.dv = f.v_x_inner ? (va.size() > 1 ? va[va.size() - 2] : "") : va.back();
  if (f.dv.empty() || !contains(f.O->axes, f.dv)) return why = "V's value axis (its innermost axis other than " + x + ") is not an output axis", std::nullopt;
  if (qa.back() != f.dk || ka.back() != f.dk) return why = "Q and K not stored with the head dimension innermost", std::nullopt;
  f.dtype = storage_dtype(d, f.Qn, opt);
  const bool fp8 = is_fp8(f.dtype);
  if ((f.dtype != DType::bf16 && f.dtype != DType::fp16 && !fp8) || storage_dtype(d, f.Kn, opt) != f.dtype || storage_dtype(d, f.Vn, opt) != f.dtype)
    return why = "operands are not all bf16, all fp16, all fp8e4m3 or all fp8e5m2", std::nullopt;
  if (fp8 && !f.v_x_inner)
    return why = std::string(dtype_name(f.dtype)) + " " + f.Vn + " is stored with " + f.dv + " innermost: O += P " + f.Vn + " contracts " + x +
                 ", and 8-bit wgmma reads its B operand K-major only (PTX ISA 9.7.15.5.1, no transpose for 8-bit types); store it as " + f.Vn +
                 "[.., " + f.dv + ", " + x + "] (x innermost) to take the fp8 flash form",
           std::nullopt;
  if (!fp8 && f.v_x_inner)
    return why = f.Vn + " is stored with " + x + " innermost: the 16-bit flash paths read V with " + f.dv + " innermost", std::nullopt;
  if (!fp8) {  // 8-bit operands have no mma.sync: the wgmma path alone (flash_wgmma_fits)
    const MmaShape* mma = hw.warp_mma(f.dtype);
    if (!mma || mma->m != 16 || mma->n != 8 || mma->k != 16) return why = "no m16n8k16 mma.sync", std::nullopt;
  }
  f.warps = k.plan.warps();
  f.TQ = *k.plan.group(f.M);
  f.DK = k.axes.at(f.dk).extent, f.DV = k.axes.at(f.dv).extent;
  if (f.TQ % (16 * f.warps) != 0 || f.TX % 16 != 0 || f.DK % 16 != 0 || f.DV % 16 != 0) return why = "tiles not multiples of the mma shape", std::nullopt;
  if (k.axes.at(f.dk).kind != AxisPlan::Kind::whole || k.axes.at(f.dv).kind != AxisPlan::Kind::whole) return why = "head dimensions not whole", std::nullopt;
  for (const auto& a : f.O->axes)
    if (a != f.M && a != f.dv) f.batch.push_back(a);
  // Causal chunks are skipped where the kernel's shape found it sound (a softmax of a causal mask).
  f.skip = k.causal_active_fraction < 1 && k.causal_x == x && k.causal_q == f.M;
  if (f.skip) {  // tile o_M keeps min(chunks, (o_M + n_q - 1) / T_X + 1) chunks (flash_chunks): the last tile is the longest
    const std::int64_t nm = k.axes.at(f.M).extent, chunks = (k.axes.at(x).extent + f.TX - 1) / f.TX;
    for (std::int64_t o = (nm - 1) / f.TQ * f.TQ; o >= 0; o -= f.TQ)
      f.tile_chunks.push_back(std::min(chunks, (o + std::min(f.TQ, nm - o) - 1) / f.TX + 1));
    double kv_bytes = 0;  // K and V whole, in their storage dtypes
    for (const auto& arr : {f.Kn, f.Vn}) {
      double e = dtype_bits(storage_dtype(d, arr, opt)) / 8.0;
      for (const auto& a : *d.array_axes(arr)) e *= static_cast<double>(k.axes.at(a).extent);
      kv_bytes += e;
    }
    f.slices_fastest = kv_bytes <= hw.l2.capacity_bytes / 2;
  }
  if (!fp8 && static_cast<double>(flash_mma_sync_smem_bytes(f)) > hw.smem_max_per_block_bytes) return why = "tiles do not fit SMEM", std::nullopt;
  return f;
}

bool flash_fp8(const FlashForm& f) { return is_fp8(f.dtype); }

char flash_statistic(const Diagram& d, const FlashForm& f, const Expr& n) {
  if (n.kind != Expr::Kind::apply || n.axes != AxisList{f.x} || n.args.size() != 1 || f.normaliser_lemma.empty()) return 0;
  const std::string a = print_expr(*f.score);
  if (n.op == Op::max) return print_expr(*n.args[0]) == a ? 'm' : 0;
  if (n.op != Op::sum) return 0;
  const Expr& e = *n.args[0];  // exp(A - M)
  if (e.kind != Expr::Kind::apply || e.op != Op::exp || e.args[0]->kind != Expr::Kind::apply || e.args[0]->op != Op::sub) return 0;
  const Expr &A = *e.args[0]->args[0], &M = *e.args[0]->args[1];
  if (M.kind != Expr::Kind::ref || print_expr(A) != a) return 0;
  const Statement* ms = d.find_statement(M.name);
  return ms && is_stat(f, ms) && flash_statistic(d, f, *ms->expr) == 'm' ? 'l' : 0;
}

std::int64_t flash_swizzle_row_elems(const FlashForm& f) { return gemm_swizzle_row_elems(f.dtype); }

std::int64_t flash_mma_sync_smem_bytes(const FlashForm& f) { return 2 * (f.TQ * (f.DK + 8) + 2 * f.TX * (f.DK + 8) + 2 * f.TX * (f.DV + 8)); }

int flash_mma_sync_registers(const FlashForm& f, int base) {
  const std::int64_t mt = std::max<std::int64_t>(1, f.TQ / (16 * std::max(1, f.warps)));
  const std::int64_t per_block = f.DK / 16 * 4 + f.DV / 8 * 4 + f.TX / 8 * 4 + 4 + 4;
  return static_cast<int>(std::min<std::int64_t>(1'000'000, mt * per_block + 4 + base));
}

std::int64_t flash_wgmma_smem_bytes(const FlashForm& f) {
  const std::int64_t e = dtype_bits(f.dtype) / 8;
  return f.TQ * f.DK * e + 2 * (f.TX * f.DK * e + f.TX * f.DV * e) + 1024 + 128;
}

bool flash_wgmma_fits(const FlashForm& f, const Diagram& d, const Hardware& hw, std::string& why) {
  if (!hw.wgmma || !hw.tma) return why = hw.name + " has no wgmma and TMA", false;
  if (!hw.warpgroup_mma(f.dtype)) return why = "no warpgroup MMA for " + std::string(dtype_name(f.dtype)), false;
  if (f.warps % 4 != 0 || f.TQ != 64 * (f.warps / 4) || f.warps / 4 > 2) return why = "T_Q not 64 rows per consumer warpgroup (4 or 8 warps)", false;
  if (f.TX % 16 != 0 || f.TX > 256) return why = "T_X not a multiple of 16 up to 256", false;
  const std::int64_t row = flash_swizzle_row_elems(f);
  const std::string rs = std::to_string(row);
  if (f.DK % row != 0 || f.DV % 64 != 0 || f.DV > 256)
    return why = row == 64 ? "head dimensions not multiples of 64 (DV up to 256)" : "head dimensions not multiples of " + rs + " (DK) and 64 (DV, up to 256)", false;
  if (f.v_x_inner && (f.TX % row != 0 || f.TX > 256))
    return why = "T_X not whole " + rs + "-element swizzle rows up to 256 (" + f.Vn + " is read with " + f.x + " innermost)", false;
  if (f.TX / 2 + f.DV / 2 + f.TX * dtype_bits(f.dtype) / 64 > 200) return why = "S, O and P over 200 registers per thread", false;
  for (const auto& arr : {f.Qn, f.Kn, f.Vn})
    if (d.array_axes(arr)->size() > 5) return why = arr + " has more than 5 axes (TMA's limit)", false;
  if (static_cast<double>(flash_wgmma_smem_bytes(f)) > hw.smem_max_per_block_bytes) return why = "Q and two stages of K and V do not fit SMEM", false;
  return true;
}

}  // namespace napkin
