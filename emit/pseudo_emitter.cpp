#include "emit/pseudo_emitter.hpp"

#include <algorithm>

#include "diagrams/printer.hpp"

namespace napkin {

namespace {

class PseudoEmitter {
 public:
  PseudoEmitter(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw)
      : p_(p), d_(d), dv_(dv), hw_(hw), weave_(weave_analysis(p, d)) {}

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
  std::string tile(const std::string& a) const {
    auto it = cost_ ? cost_->axes.find(a) : std::map<std::string, AxisPlan>::const_iterator{};
    if (!cost_ || it == cost_->axes.end() || it->second.kind == AxisPlan::Kind::whole) return a;
    return a + ":" + std::to_string(it->second.tile);
  }
  double tile_elems(const AxisList& axes) const {
    double n = 1;
    for (const auto& a : axes) {
      auto it = cost_ ? cost_->axes.find(a) : std::map<std::string, AxisPlan>::const_iterator{};
      n *= static_cast<double>(cost_ && it != cost_->axes.end() ? it->second.tile : 1);
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
      std::string part = ap.kind == AxisPlan::Kind::whole ? ":" : ap.tile == 1 ? a : a + "0:" + a + "0+" + std::to_string(ap.tile);
      s += (s.empty() ? "" : ", ") + part;
    }
    return array + "[" + s + "]";
  }

  void kernel(std::size_t k) {
    const KernelChoice& kc = dv_.chosen.kernels[k];
    cost_ = &kc.cost;
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
    int loops = 0;
    for (const auto* a : d_.axes()) {
      auto it = kc.cost.axes.find(a->name);
      if (it == kc.cost.axes.end() || it->second.kind != AxisPlan::Kind::group) continue;
      const AxisPlan& ap = it->second;
      line("parallel for " + a->name + "0 in 0.." + std::to_string(ap.extent) + " step " + std::to_string(ap.tile) +
           "  # thread blocks: " + std::to_string(ap.count) + " along " + a->name);
      ++indent_, ++loops;
    }
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
    auto statement_line = [&](const std::string& name, const std::string& note) {
      const Statement* s = d_.find_statement(name);
      MemLevel lv = kc.cost.level.count(name) ? kc.cost.level.at(name) : MemLevel::reg;
      line(decl(name, lv, true) + " = " + print_expr(*s->expr) + (note.empty() ? "" : "  # " + note));
    };
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
            line("save " + s + "_reg -> " + slice(s));
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
      if (!carries(o)) line("save " + o + "_reg -> " + slice(o));
    line("# per thread block: " + human_bytes(kc.cost.smem_resident_bytes) + " SMEM, " +
         std::to_string(kc.cost.registers_per_thread) + " registers per thread, " + std::to_string(kc.plan.warps()) + " warps");
    indent_ -= loops;
    --indent_;
  }
  static std::string lemma_state(const std::string& id) { return napkin::lemma(id).state; }

  const Program& p_;
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

std::string emit_pseudo(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw) {
  PseudoEmitter e(p, d, dv, hw);
  for (const auto& k : dv.chosen.kernels)
    for (const auto& [a, ap] : k.cost.axes) e.dv_sizes_[a] = ap.extent;
  for (const auto* a : d.axes())
    if (!e.dv_sizes_.count(a->name)) e.dv_sizes_[a->name] = 1;
  return e.run();
}

}  // namespace napkin
