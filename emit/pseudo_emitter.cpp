#include "emit/pseudo_emitter.hpp"

#include <algorithm>

#include <fmt/ranges.h>

#include "diagrams/printer.hpp"
#include "lower/lower.hpp"

namespace napkin {

namespace {

class PseudoEmitter {
 public:
  PseudoEmitter(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw)
      : d_(d), dv_(dv), hw_(hw), weave_(weave_analysis(p, d)) {}

  std::string run() {
    line("# napkin pseudocode: diagram " + d_.name + ", schedule derived for " + hw_.name);
    for (const auto* in : d_.inputs()) line("# in HBM: " + decl(in->name, MemLevel::hbm, false));
    for (const auto* o : d_.outputs()) line("# out HBM: " + decl(o->name, MemLevel::hbm, false));
    for (std::size_t k = 0; k < dv_.chosen.kernels.size(); ++k) kernel(k);
    return out_;
  }

 private:
  void line(const std::string& s) { out_ += std::string(2 * static_cast<std::size_t>(indent_), ' ') + s + "\n"; }

  const KernelCost* cost_ = nullptr;
  /** Per kernel: tile extents the spec's form sets (gemm: T_M, T_N, T_K; flash: T_Q, T_X, head
   *  widths), which the CUDA kernel uses in place of the schedule's. */
  std::map<std::string, std::int64_t> form_tile_;
  std::string tile(const std::string& a) const {
    if (auto f = form_tile_.find(a); f != form_tile_.end()) return a + ":" + std::to_string(f->second);
    auto it = cost_ ? cost_->axes.find(a) : std::map<std::string, AxisPlan>::const_iterator{};
    if (!cost_ || it == cost_->axes.end() || it->second.kind == AxisPlan::Kind::whole) return a;
    return a + ":" + std::to_string(it->second.tile);
  }
  double tile_elems(const AxisList& axes) const {
    double n = 1;
    for (const auto& a : axes) {
      auto it = cost_ ? cost_->axes.find(a) : std::map<std::string, AxisPlan>::const_iterator{};
      auto f = form_tile_.find(a);
      n *= static_cast<double>(f != form_tile_.end() ? f->second : cost_ && it != cost_->axes.end() ? it->second.tile : 1);
    }
    return n;
  }
  /** `Q_smem[b, q:128, d] bf16 (32 KB)` for a tile, or the whole array for HBM. */
  std::string decl(const std::string& array, MemLevel level, bool is_tile) {
    const AxisList& ax = *d_.array_axes(array);
    std::string dims;
    for (const auto& a : ax) dims += (dims.empty() ? "" : ", ") + (is_tile ? tile(a) : a);
    DType dt = level == MemLevel::reg ? DType::fp32 : storage_dtype(d_, array, {});
    std::string name = array + (level == MemLevel::hbm ? "" : "_" + std::string(level_name(level)));
    double bytes = (is_tile ? tile_elems(ax) : static_cast<double>(product(dv_sizes_, ax))) * dtype_bits(dt) / 8.0;
    return name + "[" + dims + "] " + std::string(dtype_name(dt)) + " (" + human_bytes(bytes) + ")";
  }
  std::string slice(const std::string& array) const {
    const AxisList& ax = *d_.array_axes(array);
    std::string s;
    for (const auto& a : ax) {
      const AxisPlan& ap = cost_->axes.at(a);
      auto f = form_tile_.find(a);
      const std::int64_t t = f != form_tile_.end() ? f->second : ap.tile;
      const bool whole = f != form_tile_.end() ? t >= ap.extent && ap.kind == AxisPlan::Kind::whole : ap.kind == AxisPlan::Kind::whole;
      std::string part = whole ? ":" : t == 1 ? a : a + "0:" + a + "0+" + std::to_string(t);
      s += (s.empty() ? "" : ", ") + part;
    }
    return array + "[" + s + "]";
  }

  void kernel(std::size_t k) {
    const KernelChoice& kc = dv_.chosen.kernels[k];
    cost_ = &kc.cost;
    form_tile_.clear();
    std::string fused;
    for (const auto& f : kc.plan.fused()) fused += (fused.empty() ? "" : ", ") + f;
    line("");
    line("kernel " + kc.plan.name + "  # fuses " + fused);
    ++indent_;
    if (kc.cost.bound.rfind("as derived", 0) == 0) {
      line("call (derived on its own; see `napkin derive` of the callee)");
      --indent_;
      return;
    }
    const KernelSpec* spec = kc.cost.spec.get();
    if (spec) line("# lowered: " + describe_spec(*spec));
    if (spec && spec->gemm) {
      gemm_header(*spec);
      gemm_body(kc, *spec);
    } else if (spec && spec->flash) {
      flash_header(*spec);
      flash_body(kc, *spec);
    } else if (spec && spec->flash_bwd) {
      flash_bwd_header(*spec);
      schedule_body(kc);
    } else if (spec && spec->strategy == Strategy::simt) {
      simt_body(kc);
    } else {
      if (spec && spec->strategy == Strategy::cols) {
        cols_body(*spec);
        --indent_;
        return;
      }
      if (spec && spec->strategy == Strategy::transpose) {
        transpose_body(*spec);
        --indent_;
        return;
      }
      if (spec && spec->strategy == Strategy::rows) {
        rows_body(*spec);
        --indent_;
        return;
      }
      schedule_body(kc);
    }
    --indent_;
  }

  /** The loops of the schedule itself (the rows strategy: its grid, and its stream when the
   *  normalised axis is streamed). */
  void schedule_body(const KernelChoice& kc) {
    const int loops = grid(kc);
    auto stream = kc.plan.stream();
    auto carries = [&](const std::string& arr) {
      const AxisList& ax = *d_.array_axes(arr);
      return stream && std::find(ax.begin(), ax.end(), stream->first) != ax.end();
    };
    for (const auto& in : kc.cost.inputs)
      if (!carries(in)) line(decl(in, MemLevel::smem, true) + " <- load " + slice(in));
    std::map<std::string, std::string> lemma;
    for (const auto& u : kc.lemmas) lemma[u.statement] = u.lemma;
    for (const auto& st : kc.cost.statements)  // every fold over the stream starts from its identity
      if (stream && !lemma[st].empty() && lemma[st] != "elementwise" && lemma[st] != "two-pass-normalisation" && !carries(st) &&
          std::any_of(weave_.begin(), weave_.end(), [&](const StatementWeave& w) {
            return w.statement->name == st && w.role(stream->first) == AxisRole::reduced;
          }))
        line(decl(st, MemLevel::reg, true) + (lemma[st] == "max-monoid" ? " = -inf" : " = 0") + "  # head: " + lemma[st] +
             " accumulator");
    for (const auto& entry : lemma) {
      const std::string& stmt = entry.first;
      const std::string& id = entry.second;
      if (id == "online-softmax" || id == "normalised-contraction" || id == "welford" || id == "two-pass-normalisation")
        if (std::any_of(weave_.begin(), weave_.end(), [&](const StatementWeave& w) { return w.statement->name == stmt && w.role(stream->first) == AxisRole::normalised; }))
          line("state of " + stmt + ": " + lemma_state(id) + "  # head");
    }
    auto statement_line = [&](const std::string& name, const std::string& note) { statement(kc, name, note); };
    std::vector<std::string> order = kc.cost.statements;
    if (!stream) {
      for (const auto& s : order) statement_line(s, "");
    } else {
      int passes = kc.plan.stream_passes();
      for (int pass = 1; pass <= passes; ++pass) {
        line("for " + stream->first + "0 in 0.." + std::to_string(kc.cost.axes.at(stream->first).extent) + " step " +
             std::to_string(stream->second) + "  # stream " + stream->first + (passes == 2 ? ", pass " + std::to_string(pass) : "") +
             (kc.cost.causal_active_fraction < 1 ? "; chunks past the causal diagonal are skipped" : ""));
        ++indent_;
        for (const auto& in : kc.cost.inputs)
          if (carries(in)) line(decl(in, MemLevel::smem, true) + " <- load " + slice(in));
        for (const auto& s : order) {
          auto w = std::find_if(weave_.begin(), weave_.end(), [&](const StatementWeave& x) { return x.statement->name == s; });
          if (!w->touches(stream->first)) continue;
          statement_line(s, "body: " + lemma[s]);
          if (const LemmaArithmetic* la = lemma_arithmetic(lemma[s])) {  // the lemma's fold, as the CPU emitter renders it
            std::map<std::string, std::string> names;
            for (const auto& [v, init] : la->state) names[v] = v;
            for (const auto& [v, what] : la->chunk) names[v] = v, line("# " + v + ": " + what);
            for (const auto& u : la->update) line("# " + render_template(u, names));
          }
          if (carries(s) && std::find(kc.cost.outputs.begin(), kc.cost.outputs.end(), s) != kc.cost.outputs.end() &&
              pass == passes)
            save_line(kc, s);
        }
        --indent_;
      }
      for (const auto& s : order) {
        auto w = std::find_if(weave_.begin(), weave_.end(), [&](const StatementWeave& x) { return x.statement->name == s; });
        if (w->touches(stream->first) && lemma[s] != "elementwise" && lemma[s] != "two-pass-normalisation")
          line("finalise " + s + "  # " + napkin::lemma(lemma[s]).state);
        else if (!w->touches(stream->first)) statement_line(s, "after the stream");
      }
    }
    for (const auto& o : kc.cost.outputs)
      if (!carries(o)) save_line(kc, o);
    footer(kc);
    indent_ -= loops;
  }
  /** `save A_reg -> A[...]`, or `add` for an output the blocks add up (KernelShape::atomic). */
  void save_line(const KernelChoice& kc, const std::string& a) {
    const bool atomic = kc.cost.spec && std::count(kc.cost.spec->shape.atomic.begin(), kc.cost.spec->shape.atomic.end(), a);
    line((atomic ? "add " : "save ") + a + "_reg -> " + slice(a) + (atomic ? "  # atomic adds into global memory (lemma atomic-sum)" : ""));
  }
  void footer(const KernelChoice& kc) {
    line("# per thread block: " + human_bytes(kc.cost.smem_resident_bytes) + " SMEM, " +
         std::to_string(kc.cost.registers_per_thread) + " registers per thread, " + std::to_string(kc.cost.warps > 0 ? kc.cost.warps : kc.plan.warps()) +
         " warps");
  }
  /** `name_level[tile] = expr  # note`. */
  void statement(const KernelChoice& kc, const std::string& name, const std::string& note) {
    const Statement* s = d_.find_statement(name);
    MemLevel lv = kc.cost.level.count(name) ? kc.cost.level.at(name) : MemLevel::reg;
    line(decl(name, lv, true) + " = " + print_expr(*s->expr) + (note.empty() ? "" : "  # " + note));
  }
  /** The kernel's grid: one parallel loop per grouped axis (declaration order), stepping by the
   *  form's tile where the spec sets one, else the schedule's group size. Returns the loops opened. */
  int grid(const KernelChoice& kc) {
    int loops = 0;
    for (const auto* a : d_.axes()) {
      auto it = kc.cost.axes.find(a->name);
      if (it == kc.cost.axes.end() || it->second.kind != AxisPlan::Kind::group) continue;
      const AxisPlan& ap = it->second;
      auto f = form_tile_.find(a->name);
      const std::int64_t t = f != form_tile_.end() ? f->second : ap.tile;
      line("parallel for " + a->name + "0 in 0.." + std::to_string(ap.extent) + " step " + std::to_string(t) + "  # thread blocks: " +
           std::to_string((ap.extent + t - 1) / t) + " along " + a->name);
      ++indent_, ++loops;
    }
    return loops;
  }
  static std::string n(std::int64_t v) { return std::to_string(v); }
  std::string extent(const std::string& a) const { return n(cost_->axes.at(a).extent); }
  static std::string atom(const MmaShape& m) { return m.ptx.empty() ? "m" + n(m.m) + "n" + n(m.n) + "k" + n(m.k) : m.ptx; }
  /** A wgmma instruction of the hardware's warpgroup atom with N = `N` (a multiple of its n). */
  static std::string wgmma_shape(const MmaShape& m, const std::string& N) {
    return "m" + n(m.m) + "n" + N + "k" + n(m.k) + " " + std::string(dtype_name(m.dtype));
  }
  static std::string warpgroups(int warps) {
    return "a producer warpgroup and " + n(warps / 4) + " consumer warpgroup" + (warps / 4 == 1 ? "" : "s");
  }
  /** How the wgmma variant's operand tiles reach SMEM: TMA, multicast to the cluster for a tile
   *  that does not vary along the cluster axis. */
  static std::string tma_mover(const KernelSpec& s, const std::string& rows, const std::string& cols) {
    if (s.cluster > 1 && rows != s.cluster_axis && cols != s.cluster_axis) return "TMA multicast to the cluster's " + n(s.cluster) + " blocks";
    return "TMA";
  }

  // ------------------------------------------------------------------ gemm
  void gemm_header(const KernelSpec& s) {
    const GemmForm& g = *s.gemm;
    line("# gemm: M = " + g.M + " (tile " + n(g.TM) + "), N = " + g.N + " (tile " + n(g.TN) + "), K = " + g.K + " (chunks of " + n(g.TK) + ", " +
         g.k_note + ")");
    for (const auto& t : g.tiles)
      line("# operand " + t.array + ": tile [" + t.rows + ":" + n(t.R) + ", " + t.cols + ":" + n(t.C) + "] " + std::string(dtype_name(g.dtype)) +
           (t.k_rows ? " (K along the rows)" : " (K contiguous)") + (s.mma_sync ? "; mma.sync: cp.async HBM -> SMEM (rows padded by " + n(gemm_mma_sync_pad_elems(g.dtype)) + "), ldmatrix -> registers" : "") +
           (s.wgmma ? "; wgmma: " + tma_mover(s, t.rows, t.cols) + " HBM -> SMEM (128-byte swizzle), read by wgmma from SMEM" : "") +
           (s.wgmma && s.repack(t.array) ? " (TMA reads a copy with rows of " + n(s.repack(t.array)->pitch) + " bytes: " + s.repack(t.array)->why + ")" : ""));
    if (s.mma_sync) line("# mma.sync: " + atom(*s.mma_sync) + ", " + n(g.sync_warps()) + " warps split " + g.M + " in rows of " + n(s.mma_sync->m));
    else line("# no mma.sync path: " + std::string(dtype_name(g.dtype)) + " operands run on wgmma alone (sm_90a)");
    if (s.wgmma)
      line("# wgmma: " + wgmma_shape(*s.wgmma_mma, n(g.TN)) + ", " + warpgroups(g.warps) + ", persistent over the output tiles" +
           (g.pingpong ? ", taking them in turn (pingpong: one's epilogue beside the other's MMAs)" : ""));
  }
  void gemm_body(const KernelChoice& kc, const KernelSpec& s) {
    const GemmForm& g = *s.gemm;
    form_tile_ = {{g.M, g.TM}, {g.N, g.TN}, {g.K, g.TK}};
    for (const auto& a : g.k_outer) form_tile_[a] = 1;
    for (const auto& a : g.batch) form_tile_[a] = 1;
    const int loops = grid(kc);
    for (std::size_t i = 0; i < g.gemms.size(); ++i)
      line("acc" + n(static_cast<std::int64_t>(i)) + "[" + tile(g.M) + ", " + tile(g.N) + "] " + (is_integer_dtype(g.dtype) ? "int32" : "fp32") + " = 0  # head: associative-sum accumulator of contract(" +
           g.gemms[i].a.array + ", " + g.gemms[i].b.array + "; " + g.K + ")");
    for (const auto& a : g.k_outer) line("for " + a + " in 0.." + extent(a) + "  # contracted, one index at a time"), ++indent_;
    line("for " + g.K + "0 in 0.." + extent(g.K) + " step " + n(g.TK) + "  # K chunks, pipelined: " +
         (s.mma_sync ? n(s.stages) + " stages in flight (mma.sync)" + (s.wgmma ? ", " + n(s.wgmma_stages) + " (wgmma)" : "")
                     : n(s.wgmma_stages) + " stages in flight (wgmma)"));
    ++indent_;
    for (const auto& t : g.tiles) line(decl(t.array, MemLevel::smem, true) + " <- load " + slice(t.array));
    for (std::size_t i = 0; i < g.gemms.size(); ++i)
      line("acc" + n(static_cast<std::int64_t>(i)) + " += " + g.gemms[i].a.array + "_smem · " + g.gemms[i].b.array + "_smem  # body: associative-sum, " +
           (s.mma_sync ? (s.wgmma ? "wgmma (sm_90a) or " : "") + std::string("mma.sync") : std::string("wgmma (sm_90a)")));
    indent_ -= 1 + static_cast<int>(g.k_outer.size());
    for (const auto& st : kc.cost.statements) statement(kc, st, "epilogue, contractions read from the accumulators");
    for (const auto& o : kc.cost.outputs) line("save " + o + "_reg -> " + slice(o));
    footer(kc);
    indent_ -= loops;
  }

  // ------------------------------------------------------------------ flash_bwd
  /** What the flash_bwd kernel keeps where (lower/flash_bwd_form.hpp); the loops are the schedule's. */
  void flash_bwd_header(const KernelSpec& s) {
    const FlashBwdForm& f = *s.flash_bwd;
    std::string tiles, outs, staged;
    for (const auto& t : f.tiles) tiles += (tiles.empty() ? "" : ", ") + t.s->name + (t.stored ? " (stored)" : "");
    for (const auto& o : f.outputs) outs += (outs.empty() ? "" : ", ") + o.out->name + " += " + o.tile + "^T " + o.operand;
    std::string outer;
    for (const auto& a : f.outer) outer += (outer.empty() ? " inside the outer stream of " : ", ") + a;
    if (!outer.empty()) outer += " (one index per step)";
    std::string atomics;
    for (const auto& o : f.atomics) atomics += (atomics.empty() ? "" : ", ") + o.out->name + " += " + o.tile + " " + o.operand;
    if (!atomics.empty()) atomics = "; added up across the blocks by atomic adds, zeroed before the launch: " + atomics;
    line("# flash_bwd: block axis " + f.X + " (tile " + n(f.TX) + ", " + std::to_string(f.warps) + " warps), " + f.Q + " streamed in chunks of " + n(f.TQ) + outer +
         "; per chunk the tiles " + tiles + " in registers (" + f.X + " rows, " + f.Q + " columns); accumulated in registers: " + outs + atomics);
    if (!f.skip.empty())
      for (const auto& t : f.tiles)
        if (t.stored)
          line("# causal skip: " + t.s->name + "'s skipped chunks written as zeros" +
               (t.zero_readers.empty() ? "" : " only in the rows of " + f.Q + " the banded gemms after it read (" + n(static_cast<std::int64_t>(100 * t.zero_share + 0.5)) + "% of them)"));
  }

  // ------------------------------------------------------------------ flash
  void flash_header(const KernelSpec& s) {
    const FlashForm& f = *s.flash;
    line("# flash: query " + f.M + " (tile " + n(f.TQ) + "), key " + f.x + " (chunks of " + n(f.TX) + ", " + f.x_note + "), head width" + (f.dk == f.dv ? " " + f.dk + " = " + n(f.DK) : "s " + f.dk + " = " + n(f.DK) + ", " + f.dv + " = " + n(f.DV)) + (f.normaliser_lemma.empty() ? ", no normaliser" : ", " + f.normaliser_lemma) +
         (f.skip ? ", chunks past the causal diagonal skipped" : ""));
    const std::string wg = s.wgmma ? "; wgmma: TMA HBM -> SMEM (128-byte swizzle)" : "";
    const std::string ms = s.mma_sync ? "; mma.sync: cp.async HBM -> SMEM, ldmatrix -> registers" : "";  // fp8: the wgmma path alone
    const std::string v_tile = f.v_x_inner ? "[" + f.dv + ":" + n(f.DV) + ", " + f.x + ":" + n(f.TX) + "]" : "[" + f.x + ":" + n(f.TX) + ", " + f.dv + ":" + n(f.DV) + "]";
    line("# operand " + f.Qn + ": tile [" + f.M + ":" + n(f.TQ) + ", " + f.dk + ":" + n(f.DK) + "] once per block" + ms + wg);
    line("# operands " + f.Kn + ", " + f.Vn + ": tiles [" + f.x + ":" + n(f.TX) + ", " + f.dk + ":" + n(f.DK) + "], " + v_tile + " per chunk, double-buffered" + ms + wg);
    if (s.mma_sync) line("# mma.sync: " + atom(*s.mma_sync) + ", " + n(f.warps) + " warps split " + f.M + " in rows of " + n(s.mma_sync->m));
    if (s.wgmma)
      line("# wgmma: " + wgmma_shape(*s.wgmma_mma, n(f.TX)) + " for S, " + wgmma_shape(*s.wgmma_mma, n(f.DV)) + " for O, " + warpgroups(f.warps));
  }
  void flash_body(const KernelChoice& kc, const KernelSpec& s) {
    const FlashForm& f = *s.flash;
    form_tile_ = {{f.M, f.TQ}, {f.x, f.TX}, {f.dk, f.DK}, {f.dv, f.DV}};
    for (const auto& a : f.batch) form_tile_[a] = 1;
    const int loops = grid(kc);
    line(decl(f.Qn, MemLevel::smem, true) + " <- load " + slice(f.Qn));
    const bool online = !f.normaliser_lemma.empty();
    line(decl(f.O->name, MemLevel::reg, true) + " = 0  # head: " + (online ? f.normaliser_lemma : "associative-sum") + " accumulator");
    if (online) line("m[" + tile(f.M) + "] = -inf, l[" + tile(f.M) + "] = 0  # head: " + lemma_state(f.normaliser_lemma));
    line("for " + f.x + "0 in 0.." + extent(f.x) + " step " + n(f.TX) + "  # stream " + f.x + ", K and V double-buffered" +
         (f.skip ? "; chunks past the causal diagonal are skipped" : ""));
    ++indent_;
    line(decl(f.Kn, MemLevel::smem, true) + " <- load " + slice(f.Kn));
    line(decl(f.Vn, MemLevel::smem, true) + " <- load " + slice(f.Vn));
    line("acc_S[" + tile(f.M) + ", " + tile(f.x) + "] fp32 = " + f.Qn + "_smem · " + f.Kn + "_smem^T  # " +
         (s.mma_sync ? (s.wgmma ? "wgmma (sm_90a) or " : "") + std::string("mma.sync") : std::string("wgmma (sm_90a)")));
    for (const auto& st : kc.cost.statements)
      if (st != f.O->name && !(online && st == f.P->name)) statement(kc, st, "score map, element by element (the contraction: acc_S)");
    if (online) {
      const std::string score = print_expr(*f.score);
      line("m_new = max(m, rowmax(" + score + ")); " + f.P->name + " = exp(" + score + " - m_new)  # body: " + f.normaliser_lemma);
      line("l = l * exp(m - m_new) + rowsum(" + f.P->name + "); " + f.O->name + "_reg = " + f.O->name + "_reg * exp(m - m_new) + " + f.P->name + " · " +
           f.Vn + "_smem; m = m_new" + (flash_fp8(f) ? "  # " + f.P->name + " rounded to " + std::string(dtype_name(f.dtype)) + " for the product" : ""));
    } else {
      line(f.O->name + "_reg += " + f.P->name + " · " + f.Vn + "_smem  # body: associative-sum");
    }
    --indent_;
    const std::string o = f.O->name + "_reg", co = print_expr(*f.co);
    if (print_expr(*f.O->expr) != co) line("finalise " + o + " = " + print_expr(*f.O->expr) + " with " + co + " = " + o + (online ? " / l" : ""));
    else if (online) line("finalise " + o + " /= l");
    line("save " + f.O->name + "_reg -> " + slice(f.O->name));
    footer(kc);
    indent_ -= loops;
  }

  // ------------------------------------------------------------------ rows
  /** `A[b, s, m0..]`: array `a` indexed by its axes, `axis` as the chunk a thread walks from `axis`0. */
  std::string chunk_of(const std::string& a, const std::string& axis) const {
    std::string s;
    for (const auto& x : *d_.array_axes(a)) s += (s.empty() ? "" : ", ") + (x == axis ? x + "0.." : x);
    return a + "[" + s + "]";
  }

  /** The rows form (lower/rows_form.hpp) as emit/cuda/rows.cpp runs it: blocks of rows, teams
   *  walking one row at a time, a statistics walk (the lemmas' per-thread state, merged across the
   *  team), the reductions stored once per row, a second walk for the per-element maps. */
  void rows_body(const KernelSpec& spec) {
    const RowsForm& f = *spec.rows;
    const std::string team = f.team_lanes < 32 ? n(f.team_lanes) + " lanes" : n(f.team_warps) + " warp(s)";
    const std::string rows = fmt::format("{}", fmt::join(f.rows, ", "));
    line("# rows: a team of " + team + " walks each row along " + f.axis + ", coalesced; statistics combined by warp shuffles" +
         (f.reduction ? std::string("; one walk, the reduction's value stored once per row") + (f.parts.size() == 1 && f.parts[0].post ? " through the statement's element-wise map" : "")
                      : "; a second walk applies the map") + (f.parts.size() > 1 ? "; " + n(static_cast<std::int64_t>(f.parts.size())) + " statements share the walks" : ""));
    line("# no tensor-core strategy: " + spec.declined);
    line("parallel for r0 in 0.." + n(f.rows_total) + " step " + n(f.rows_per_block) + "  # thread blocks: " + n(f.blocks) + " over the rows [" + rows + "] flattened, " +
         n(f.blocks_per_sm) + " per SM");
    ++indent_;
    line("parallel for team in 0.." + n(f.teams_per_block()) + "  # teams of " + team + "; rows r0 + team, r0 + team + " + n(f.teams_per_block()) + ", .. below r0 + " +
         n(f.rows_per_block));
    ++indent_;
    auto at = [&](const std::string& a) { return chunk_of(a, f.axis); };  // at the team's row, the walk's chunk
    for (const auto& a : f.row_arrays) line("load " + at(a) + "  # once per row");
    auto staged = [&](const std::string& a) { return f.staged > 0 && std::count(f.staged_arrays.begin(), f.staged_arrays.end(), a) > 0; };
    auto walk = [&](const RowsWalk& w, const std::string& what, bool map_walk) {
      const std::int64_t rounds = map_walk ? f.map_rounds() : f.rounds_per_walk();
      line("for " + f.axis + "0 in " + (map_walk ? n(f.extent) + " down to 0" : "0.." + n(f.extent)) + " step " + n(f.elements_per_round()) + "  # " + what + ": " +
           n(rounds) + (rounds == 1 ? " round" : " rounds") + (map_walk && f.staged > 0 ? " from L2 or HBM" : "") +
           (f.vector ? ", " + n(f.unroll) + " 16-byte accesses in flight a lane" : ", one element an access") + (map_walk ? "; the row's last chunk first" : ""));
      ++indent_;
      for (const auto& a : w.vector_arrays) {
        if (!staged(a)) line("load " + at(a) + "  # 8 elements an access");
        else if (map_walk) line("load " + at(a) + "  # 8 elements an access, from SMEM below " + f.axis + " = " + n(f.staged));
        else line("load " + at(a) + "  # 8 elements an access; kept in SMEM below " + f.axis + " = " + n(f.staged) + " for the map walk");
      }
      for (const auto& a : w.scalar_arrays) line("load " + at(a) + "  # one element an access");
    };
    walk(f.statistics, "statistics walk", false);
    for (const auto& p : f.parts)
      if (p.kind != RowsPart::Kind::map) {
        const Statement& st = *d_.find_statement(p.statement);
        line("fold " + p.statement + " = " + print_expr(*st.expr) + "  # per thread: " + rows_state(rows_core(d_, st)));
      }
    --indent_;
    line("merge the team's statistics: warp shuffles" + std::string(f.team_warps > 1 ? ", then SMEM across its warps" : ""));
    for (const auto& p : f.parts)
      if (p.per_row() && p.stored) line("save " + at(p.statement) + "  # the team's first lane");
    if (!f.reduction) {
      walk(f.map, "map walk", true);
      for (const auto& p : f.parts)
        if (!p.per_row() && p.stored)
          line(at(p.statement) + " = " + print_expr(*d_.find_statement(p.statement)->expr) + (p.vector_output ? "  # stored 8 elements an access" : ""));
      --indent_;
    }
    indent_ -= 2;
    line("# per thread block: " + human_bytes(static_cast<double>(f.smem_bytes)) + " SMEM, " + n(f.registers) + " registers per thread, " + n(f.warps) + " warps");
  }

  /** The statistics a rows kernel's thread keeps for `core` (emit/cuda/rows.cpp). */
  static std::string rows_state(const Expr* core) {
    if (!core) return "its statistics";
    switch (core->op) {
      case Op::softmax: return "online max and sum of exp (online-softmax lemma)";
      case Op::layernorm: return "count, sum and sum of squares, shifted by the row's first element";
      case Op::rmsnorm: return "count, sum and sum of squares";
      case Op::max: return "running max";
      case Op::mean: return "running sum, divided by the extent at the end";
      default: return "running sum";
    }
  }

  // ------------------------------------------------------------------ transpose
  /** The transpose form (lower/transpose_form.hpp) as emit/cuda/transpose.cpp runs it: one block
   *  per T x T tile over the two innermost axes and per index of the other axes; the tile loaded
   *  along X's innermost axis into padded SMEM, then stored along Y's. */
  void transpose_body(const KernelSpec& spec) {
    const TransposeForm& f = *spec.transpose;
    const std::string t = n(TransposeForm::T);
    line("# transpose: tiles of " + t + " x " + t + " over " + f.out_inner + " and " + f.in_inner + " through SMEM, loaded along " + f.in_inner + " and stored along " +
         f.out_inner + " (both coalesced), " + n(TransposeForm::per_thread()) + " elements in flight a thread");
    line("# no tensor-core strategy: " + spec.declined);
    std::string batch = f.batch.empty() ? "" : " x [" + fmt::format("{}", fmt::join(f.batch, ", ")) + "]";
    line("parallel for " + f.in_inner + "0, " + f.out_inner + "0 in tiles of " + t + " x " + t + batch + "  # thread blocks: " + n(f.blocks) + " (" + n(f.tiles_in) + " x " +
         n(f.tiles_out) + " tiles" + (batch.empty() ? "" : " x the batch") + "), " + n(f.blocks_per_sm) + " per SM");
    ++indent_;
    line("tile_smem[" + f.out_inner + ":" + t + ", " + f.in_inner + ":" + t + " + 1] fp32 (" + human_bytes(static_cast<double>(f.smem_bytes)) + ") <- load " + f.source +
         " along " + f.in_inner + "  # each warp " + n(TransposeForm::T / TransposeForm::warps) + " rows, 32 consecutive elements an access");
    line("barrier");
    line(f.statement + "[.., " + f.out_inner + "0.." + "] <- tile_smem along " + f.out_inner + "  # the padded row: no bank conflicts either way");
    --indent_;
    line("# per thread block: " + human_bytes(static_cast<double>(f.smem_bytes)) + " SMEM, " + n(f.registers) + " registers per thread, " + n(TransposeForm::warps) + " warps");
  }

  // ------------------------------------------------------------------ cols
  /** The cols form (lower/cols_form.hpp) as emit/cuda/cols.cpp runs it: blocks of consecutive
   *  columns (Y's elements, flattened), each lane VEC of them; the block's threads per column
   *  group split the reduced rows, UNROLL loads in flight each; partials summed in SMEM in a fixed
   *  order; the block's first row of threads stores. */
  void cols_body(const KernelSpec& spec) {
    const ColsForm& f = *spec.cols;
    const Statement& st = *d_.find_statement(f.statement);
    const std::string cols = fmt::format("{}", fmt::join(f.cols, ", ")), rows = fmt::format("{}", fmt::join(f.axes, ", "));
    line("# cols: " + n(f.cols_per_block()) + " columns per block, " + n(f.vec) + " per lane (coalesced rows); " + n(f.row_lanes()) +
         " threads per column group split " + rows + ", " + n(f.unroll) + " rows in flight each; partials added in SMEM in a fixed order");
    line("# no tensor-core strategy: " + spec.declined);
    line("parallel for c0 in 0.." + n(f.cols_total) + " step " + n(f.cols_per_block()) + "  # thread blocks: " + n(f.blocks) + " over the columns [" + cols +
         "] flattened, " + n(f.blocks_per_sm) + " per SM");
    ++indent_;
    const std::string first = f.vec > 1 ? "c0 + " + n(f.vec) + " lane" : "c0 + lane";
    line("parallel for lane in 0.." + n(f.col_lanes) + ", t in 0.." + n(f.row_lanes()) + "  # threads: columns " + first +
         (f.vec > 1 ? " .. " + first + " + " + n(f.vec - 1) : "") + "; rows t, t + " + n(f.row_lanes()) + ", ..");
    ++indent_;
    line("partial_reg[" + n(f.vec) + "] fp32 = identity of the reduction");
    line("for r in t..(" + n(f.extent) + " rows of " + rows + ") step " + n(f.row_lanes()) + "  # " + n(f.unroll) + " rows' loads in flight, " +
         n(f.rounds()) + (f.rounds() == 1 ? " dependent round" : " dependent rounds"));
    ++indent_;
    auto at = [&](const std::string& a) { return chunk_of(a, f.cols.back()); };  // at row r, the lane's columns
    for (const auto& a : f.arrays) line("load " + at(a) + "  # coalesced along " + f.cols.back());
    for (const auto& a : f.row_arrays) line("load " + at(a) + "  # one address per row");
    line("partial_reg <- fold the reduction's argument of " + print_expr(*st.expr) + " at row r");
    --indent_;
    if (f.row_lanes() > 1) line("partials_smem[" + n(f.row_lanes()) + " x " + n(f.cols_per_block()) + "] fp32 (" + human_bytes(static_cast<double>(f.smem_bytes)) + ") <- partial_reg; halved in a tree, a fixed order");
    for (const auto& a : f.col_arrays) line("load " + at(a) + "  # once per column");
    line(at(st.name) + " = " + print_expr(*st.expr) + (f.post ? "  # the map of the summed partials" : "") + "; threads t = 0 store");
    --indent_;
    --indent_;
    line("# per thread block: " + human_bytes(static_cast<double>(f.smem_bytes)) + " SMEM, " + n(f.registers) + " registers per thread, " + n(f.warps) + " warps");
  }

  // ------------------------------------------------------------------ simt
  void simt_body(const KernelChoice& kc) {
    line("# simt: one launch per statement, one thread per output element, reductions as loops, every array in HBM");
    for (const auto& st : kc.cost.statements) {
      const Statement* s = d_.find_statement(st);
      std::string ax;
      for (const auto& a : s->axes) ax += (ax.empty() ? "" : ", ") + a;
      line("parallel for each element [" + ax + "] of " + st + "  # one thread each: " + n(product(dv_sizes_, s->axes)) + " threads");
      ++indent_;
      line(st + "[" + ax + "] = " + print_expr(*s->expr));
      --indent_;
    }
    line("# per thread block: " + std::to_string(kc.cost.warps * 32) + " threads, " + std::to_string(kc.cost.registers_per_thread) + " registers per thread");
  }
  static std::string lemma_state(const std::string& id) { return napkin::lemma(id).state; }

  const Diagram& d_;
  const Derivation& dv_;
  const Hardware& hw_;
  std::vector<StatementWeave> weave_;
  std::string out_;
  int indent_ = 0;

 public:
  SizeMap dv_sizes_;
};

}  // namespace

std::string emit_pseudo(const Program& p, const Diagram& given, const Derivation& dv, const Hardware& hw) {
  const Diagram& d = dv.diagram(given);  // the schedules are of derive's rewrite where it made one
  PseudoEmitter e(p, d, dv, hw);
  for (const auto& k : dv.chosen.kernels)
    for (const auto& [a, ap] : k.cost.axes) e.dv_sizes_[a] = ap.extent;
  for (const auto* a : d.axes())
    if (!e.dv_sizes_.count(a->name)) e.dv_sizes_[a->name] = 1;
  return e.run();
}

}  // namespace napkin
