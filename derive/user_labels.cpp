#include "derive/user_labels.hpp"

#include <algorithm>

#include "diagrams/graph_view.hpp"

namespace napkin {

SourceLoc UserLabels::first() const {
  SourceLoc best;
  auto consider = [&](const SourceLoc& l) {
    if (l.valid() && (!best.valid() || l.line < best.line || (l.line == best.line && l.col < best.col))) best = l;
  };
  for (const auto& m : {&group, &stream})
    for (const auto& [a, w] : *m) consider(w.loc);
  if (warps) consider(warps->loc);
  for (const auto& [a, w] : level) consider(w.loc);
  return best;
}

namespace {

/** The statement that reduces or normalises `axis` first (nullptr when every one weaves it). */
const StatementWeave* reducer(const std::vector<StatementWeave>& weave, const std::string& axis) {
  for (const auto& w : weave)
    if (w.touches(axis) && w.role(axis) != AxisRole::woven) return &w;
  return nullptr;
}

class Reader {
 public:
  Reader(const Diagram& d, const std::vector<StatementWeave>& weave, const SizeMap& sizes, DiagnosticEngine& diags)
      : d_(d), weave_(weave), sizes_(sizes), diags_(diags) {}

  UserLabels read() {
    for (const auto* a : d_.axes()) axis(*a);
    std::set<std::string> outputs;
    for (const auto* o : d_.outputs()) {
      outputs.insert(o->name);
      if (o->level && *o->level != MemLevel::hbm)
        diags_.error(o->loc, "'" + o->name + "' is an output: it is written to HBM, so '@" + std::string(level_name(*o->level)) +
                                 "' cannot hold (label the statement that computes it to keep an intermediate on chip)");
    }
    for (const auto* in : d_.inputs())
      if (in->level && *in->level != MemLevel::hbm)
        diags_.error(in->loc, "'" + in->name + "' is an input: it arrives in HBM, so '@" + std::string(level_name(*in->level)) +
                                  "' cannot hold (label its reads, e.g. " + in->name + "@smem)");
    for (const auto* s : d_.statements()) {
      if (s->level) array_level(s->name, *s->level, s->loc, outputs);
      walk(*s->expr, [&](const Expr& n) {
        if (n.kind == Expr::Kind::ref && n.level) read_level(n, outputs);
      });
    }
    return std::move(out_);
  }

 private:
  void axis(const AxisDecl& a) {
    const SourceLoc at = a.label_loc.valid() ? a.label_loc : a.loc;
    const std::int64_t extent = sizes_.at(a.name);
    if (a.group) {
      if (const auto* r = reducer(weave_, a.name))
        diags_.error(at, "cannot keep 'group " + std::to_string(*a.group) + "' on axis '" + a.name + "': it is " +
                             std::string(role_name(r->role(a.name))) + " by " + std::string(op_name(r->roles.at(a.name).op)) +
                             " in '" + r->statement->name + "'; a group partition needs an axis every operation is woven over (stream it instead)");
      else if (*a.group < 1 || *a.group > extent)
        diags_.error(at, "cannot keep 'group " + std::to_string(*a.group) + "' on axis '" + a.name + "' of size " + std::to_string(extent) +
                             ": a group size is between 1 and the axis size");
      else out_.group[a.name] = {*a.group, at};
    }
    if (a.stream) {
      if (!reducer(weave_, a.name))
        diags_.error(at, "cannot keep 'stream " + std::to_string(*a.stream) + "' on axis '" + a.name +
                             "': no operation reduces or normalises it, and only such an axis is streamed (group it instead)");
      else if (*a.stream < 1 || *a.stream >= extent)
        diags_.error(at, "cannot keep 'stream " + std::to_string(*a.stream) + "' on axis '" + a.name + "' of size " + std::to_string(extent) +
                             ": a stream size is at least 1 and below the axis size (a whole axis is kept, not streamed)");
      else out_.stream[a.name] = {*a.stream, at};
    }
    if (a.stream_twice) diags_.error(at, "'twice' on axis '" + a.name + "' is written by derive; napkin does not keep it as a constraint (write `stream N` alone)");
    if (a.cluster) diags_.error(at, "'cluster' on axis '" + a.name + "' is written by derive; napkin does not keep it as a constraint (schedule it: cluster " + a.name + " by N)");
    if (a.warps_pingpong) diags_.error(at, "'pingpong' on axis '" + a.name + "' is written by derive; napkin does not keep it as a constraint (schedule it: warps 8 pingpong)");
    if (a.warps) {
      if (*a.warps < 1 || *a.warps > 32) diags_.error(at, "cannot keep 'warps " + std::to_string(*a.warps) + "': a thread block has 1 to 32 warps");
      else if (out_.warps && out_.warps->value != *a.warps) diags_.error(at, "two warp counts written ('warps " + std::to_string(out_.warps->value) + "' before); a thread block has one");
      else out_.warps = Written<std::int64_t>{*a.warps, at};
    }
  }

  void read_level(const Expr& n, const std::set<std::string>& outputs) {
    if (d_.find_input(n.name)) {
      if (*n.level == MemLevel::reg || *n.level == MemLevel::l2)
        diags_.error(n.loc, "cannot keep '" + n.name + "@" + std::string(level_name(*n.level)) + "': every lowering reads an input from HBM through SMEM into registers (write " + n.name + "@smem or " + n.name + "@hbm)");
      return;
    }
    if (d_.find_statement(n.name)) array_level(n.name, *n.level, n.loc, outputs);
  }

  void array_level(const std::string& name, MemLevel l, SourceLoc loc, const std::set<std::string>& outputs) {
    if (l == MemLevel::l2) {
      diags_.error(loc, "cannot keep '@l2' on '" + name + "': L2 is a cache napkin does not place arrays in (@hbm, @smem or @reg)");
      return;
    }
    if (outputs.count(name) && l != MemLevel::hbm) {
      diags_.error(loc, "cannot keep '@" + std::string(level_name(l)) + "' on '" + name + "': it is an output, written to HBM");
      return;
    }
    auto [it, fresh] = out_.level.emplace(name, Written<MemLevel>{l, loc});
    if (!fresh && it->second.value != l)
      diags_.error(loc, "'" + name + "' is labelled both @" + std::string(level_name(it->second.value)) + " and @" + std::string(level_name(l)));
  }

  const Diagram& d_;
  const std::vector<StatementWeave>& weave_;
  const SizeMap& sizes_;
  DiagnosticEngine& diags_;
  UserLabels out_;
};

}  // namespace

UserLabels user_labels(const Diagram& d, const std::vector<StatementWeave>& weave, const SizeMap& sizes, DiagnosticEngine& diags) {
  return Reader(d, weave, sizes, diags).read();
}

std::string kernel_breaks_labels(const UserLabels& labels, const std::vector<const StatementWeave*>& stmts,
                                 const std::set<std::string>& escaping, const KernelPlan& plan, const KernelCost& cost) {
  const bool call = stmts.size() == 1 && stmts.front()->has_call;  // one launch of its callee: no partition of its own
  for (const auto& [name, w] : labels.group) {
    if (call) break;
    const std::string& axis = name;  // a plain name: clang before 16 cannot capture a structured binding
    bool touched = std::any_of(stmts.begin(), stmts.end(), [&](const StatementWeave* s) { return s->touches(axis); });
    if (!touched) continue;
    std::int64_t g = plan.group(axis).value_or(0);
    auto it = cost.axes.find(axis);
    std::int64_t extent = it == cost.axes.end() ? 0 : it->second.extent;
    if (g != w.value && !(g == 0 && w.value == extent)) return "'group " + std::to_string(w.value) + "' on " + axis;
  }
  for (const auto& [name, w] : labels.stream) {
    if (call) break;
    const std::string& axis = name;
    bool reduced = std::any_of(stmts.begin(), stmts.end(), [&](const StatementWeave* s) { return s->touches(axis) && s->role(axis) != AxisRole::woven; });
    if (!reduced) continue;
    bool kept = false;
    for (const auto& [a, size] : plan.streams()) kept |= a == axis && size == w.value;
    if (!kept) return "'stream " + std::to_string(w.value) + "' on " + axis;
  }
  if (labels.warps && plan.find(Directive::Kind::warps) && plan.warps() != labels.warps->value)
    return "'warps " + std::to_string(labels.warps->value) + "'";
  for (const auto* s : stmts) {
    auto it = labels.level.find(s->statement->name);
    if (it == labels.level.end()) continue;
    const std::string& name = s->statement->name;
    const MemLevel want = it->second.value;
    if (want == MemLevel::hbm) {
      if (!escaping.count(name)) return "'" + name + "@hbm' (it must leave its kernel)";
      continue;
    }
    if (escaping.count(name)) return "'" + name + "@" + std::string(level_name(want)) + "' (it must stay in its kernel)";
    auto lv = cost.level.find(name);
    if (lv != cost.level.end() && lv->second != want)
      return "'" + name + "@" + std::string(level_name(want)) + "' (the model places it in " + std::string(level_name(lv->second)) + ")";
  }
  return {};
}

}  // namespace napkin
