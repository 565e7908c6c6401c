// The flash form and the checks of its two variants (contract in flash_form.hpp). The emitters
// (emit/cuda/flash.cpp, flash_wgmma.cpp) render what these functions accept and never decline it.
#include "lower/flash_form.hpp"

#include <algorithm>
#include <functional>

#include "diagrams/graph_view.hpp"

namespace napkin {

std::optional<FlashForm> analyse_flash(const Diagram& d, const KernelShape& k, const Hardware& hw, const ModelOptions& opt, std::string& why) {
  auto streams = k.plan.streams();
  if (streams.size() > 1 || k.plan.stream_passes() != 1) return why = "more than one stream, or a two-pass stream", std::nullopt;
  // x is the softmax's axis: streamed by the schedule, or kept whole and walked in chunks of 64.
  std::string x;
  for (const auto& name : k.statements) {
    const Statement* st = d.find_statement(name);
    if (st->expr->kind == Expr::Kind::apply && st->expr->op == Op::softmax) x = st->expr->axes[0];
  }
  if (x.empty() || (!streams.empty() && streams[0].first != x)) return why = "no softmax along the streamed axis", std::nullopt;
  if (streams.empty() && (!k.axes.count(x) || k.axes.at(x).kind != AxisPlan::Kind::whole)) return why = "the softmax axis is grouped", std::nullopt;
  const std::int64_t TX = streams.empty() ? 64 : streams[0].second;
  const std::string x_note = streams.empty() ? "kept whole in the schedule, walked in chunks of 64" : "streamed by " + std::to_string(TX);
  // Find P (softmax along x), S (the contraction it reads), O (the contraction of P).
  const Statement *S = nullptr, *P = nullptr, *O = nullptr;
  const Expr *cs = nullptr, *co = nullptr;
  for (const auto& name : k.statements) {
    const Statement* st = d.find_statement(name);
    if (st->expr->kind == Expr::Kind::apply && st->expr->op == Op::softmax && st->expr->axes[0] == x) P = st;
  }
  if (!P || k.statements.size() != 3) return why = "not contraction, softmax, contraction", std::nullopt;
  for (const auto& name : k.statements) {
    const Statement* st = d.find_statement(name);
    if (st == P) continue;
    std::vector<const Expr*> cons;
    bool other = false;
    walk(*st->expr, [&](const Expr& e) {
      if (e.kind != Expr::Kind::apply) return;
      if (e.op == Op::contract) cons.push_back(&e);
      else if (!is_elementwise(e.op) && e.op != Op::causal) other = true;
    });
    if (other || cons.size() != 1 || cons[0]->args.size() != 2 || cons[0]->axes.size() != 1) return why = "statements are not single contractions", std::nullopt;
    const Expr* e = cons[0];
    if (e->axes[0] == x && e->args[0]->kind == Expr::Kind::ref && e->args[0]->name == P->name) O = st, co = e;
    else S = st, cs = e;
  }
  if (!S || !O || !cs || !co) return why = "no S -> P -> O chain", std::nullopt;
  const std::string dk = cs->axes[0];
  const Expr &q_ref = *cs->args[0], &k_ref = *cs->args[1], &v_ref = *co->args[1];
  if (q_ref.kind != Expr::Kind::ref || k_ref.kind != Expr::Kind::ref || v_ref.kind != Expr::Kind::ref) return why = "operands are not arrays", std::nullopt;
  std::string Qn = q_ref.name, Kn = k_ref.name, Vn = v_ref.name;
  if (!d.array_axes(Qn) || !d.array_axes(Kn) || !d.array_axes(Vn)) return why = "operands are not arrays", std::nullopt;
  AxisList qa = *d.array_axes(Qn), ka = *d.array_axes(Kn), va = *d.array_axes(Vn);
  if (contains(qa, x)) std::swap(Qn, Kn), std::swap(qa, ka);
  std::string M;
  for (const auto& dir : k.plan.directives)
    if (dir.kind == Directive::Kind::group && M.empty() && contains(qa, dir.names[0]) && !contains(ka, dir.names[0])) M = dir.names[0];
  if (M.empty() || !contains(ka, x)) return why = "no grouped query axis", std::nullopt;
  const std::string dv = va.back();  // the value dimension: V's innermost axis
  if (dv == x || !contains(O->axes, dv)) return why = "V's innermost axis is not an output axis", std::nullopt;
  if (qa.back() != dk || ka.back() != dk) return why = "Q, K, V not stored with the head dimension innermost", std::nullopt;
  const DType dt = storage_dtype(d, Qn, opt);
  if ((dt != DType::bf16 && dt != DType::fp16) || storage_dtype(d, Kn, opt) != dt || storage_dtype(d, Vn, opt) != dt)
    return why = "operands are not all bf16 or all fp16", std::nullopt;
  const MmaShape* mma = hw.warp_mma(dt);
  if (!mma || mma->m != 16 || mma->n != 8 || mma->k != 16) return why = "no m16n8k16 mma.sync", std::nullopt;
  const int warps = k.plan.warps();
  const std::int64_t TQ = *k.plan.group(M);
  const std::int64_t DK = k.axes.at(dk).extent, DV = k.axes.at(dv).extent;
  if (TQ % (16 * warps) != 0 || TX % 16 != 0 || DK % 16 != 0 || DV % 16 != 0) return why = "tiles not multiples of the mma shape", std::nullopt;
  if (k.axes.at(dk).kind != AxisPlan::Kind::whole || k.axes.at(dv).kind != AxisPlan::Kind::whole) return why = "head dimensions not whole", std::nullopt;
  AxisList batch;
  for (const auto& a : O->axes)
    if (a != M && a != dv) batch.push_back(a);
  bool causal = false;
  walk(*P->expr, [&](const Expr& e) { causal |= e.kind == Expr::Kind::apply && e.op == Op::causal && e.axes[0] == M && e.axes[1] == x; });
  const bool skip = causal && k.causal_active_fraction < 1 && k.causal_x == x && k.causal_q == M;
  FlashForm f{x, M, dk, dv, Qn, Kn, Vn, S, P, O, cs, co, batch, dt, TQ, TX, DK, DV, warps, skip, x_note};
  if (static_cast<double>(flash_mma_sync_smem_bytes(f)) > hw.smem_max_per_block_bytes) return why = "tiles do not fit SMEM", std::nullopt;
  return f;
}

std::int64_t flash_mma_sync_smem_bytes(const FlashForm& f) { return 2 * (f.TQ * (f.DK + 8) + 2 * f.TX * (f.DK + 8) + 2 * f.TX * (f.DV + 8)); }

std::int64_t flash_wgmma_smem_bytes(const FlashForm& f) { return f.TQ * f.DK * 2 + 2 * (f.TX * f.DK * 2 + f.TX * f.DV * 2) + 1024 + 128; }

bool flash_wgmma_fits(const FlashForm& f, const Diagram& d, const Hardware& hw, std::string& why) {
  if (!hw.wgmma || !hw.tma) return why = hw.name + " has no wgmma and TMA", false;
  if (!hw.warpgroup_mma(f.dtype)) return why = "no warpgroup MMA for " + std::string(dtype_name(f.dtype)), false;
  if (f.warps % 4 != 0 || f.TQ != 64 * (f.warps / 4) || f.warps / 4 > 2) return why = "T_Q not 64 rows per consumer warpgroup (4 or 8 warps)", false;
  if (f.TX % 16 != 0 || f.TX > 256) return why = "T_X not a multiple of 16 up to 256", false;
  if (f.DK % 64 != 0 || f.DV % 64 != 0 || f.DV > 256) return why = "head dimensions not multiples of 64 (DV up to 256)", false;
  if (f.TX / 2 + f.DV / 2 + f.TX / 4 > 200) return why = "S, O and P over 200 registers per thread", false;
  for (const auto& arr : {f.Qn, f.Kn, f.Vn})
    if (d.array_axes(arr)->size() > 5) return why = arr + " has more than 5 axes (TMA's limit)", false;
  if (static_cast<double>(flash_wgmma_smem_bytes(f)) > hw.smem_max_per_block_bytes) return why = "Q and two stages of K and V do not fit SMEM", false;
  return true;
}

}  // namespace napkin
