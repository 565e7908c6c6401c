#include "derive/labelled.hpp"

#include <algorithm>

#include "derive/check_schedule.hpp"

namespace napkin {

Diagram kernel_diagram(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave,
                       const std::vector<std::string>& statements, const std::string& name, const ModelOptions& opt) {
  (void)p;
  std::vector<const StatementWeave*> mine;
  for (const auto& s : statements) {
    auto it = std::find_if(weave.begin(), weave.end(), [&](const StatementWeave& w) { return w.statement->name == s; });
    NAPKIN_ASSERT(it != weave.end()) << "kernel '" << name << "' names no statement '" << s << "'";
    mine.push_back(&*it);
  }
  Diagram k;
  k.name = name;
  k.loc = d.loc;
  for (const auto* a : d.axes()) {
    AxisDecl axis = *a;  // the kernel's own labels come from its plan, not from the source's
    axis.group = axis.stream = axis.warps = axis.cluster = std::nullopt;
    axis.stream_twice = axis.warps_pingpong = false;
    axis.trivia = {};
    k.items.push_back(std::move(axis));
  }
  std::vector<std::string> outside;
  for (const auto* w : mine)
    for (const auto& r : w->reads)
      if (!contains(statements, r) && !contains(outside, r)) outside.push_back(r);
  for (const auto& r : outside) {
    InputDecl in;
    in.name = r;
    in.axes = *d.array_axes(r);
    in.axis_locs.assign(in.axes.size(), d.loc);
    in.dtype = storage_dtype(d, r, opt);
    in.loc = d.loc;
    k.items.push_back(std::move(in));
  }
  for (const auto* w : mine) {
    Statement s = *w->statement;
    s.trivia = {};
    k.items.push_back(std::move(s));
  }
  for (const auto& e : escaping_arrays(d, mine, weave)) {
    OutputDecl o;
    o.name = e;
    o.dtype = storage_dtype(d, e, opt);
    o.loc = d.loc;
    k.items.push_back(std::move(o));
  }
  return k;
}

AxisDecl& axis_of(Diagram& k, const std::string& name) {
  for (auto& it : k.items)
    if (auto* a = std::get_if<AxisDecl>(&it); a && a->name == name) return *a;
  NAPKIN_ASSERT(false) << "kernel '" << k.name << "' has no axis '" << name << "'";
  throw InternalError("unreachable");
}

namespace {

/** The axis the warp split of `k` runs along: the first with a group label over 1, else the
 *  first with any partition label, else the first axis. */
AxisDecl* warp_axis(Diagram& k) {
  AxisDecl *grouped = nullptr, *labelled = nullptr, *first = nullptr;
  for (auto& it : k.items)
    if (auto* a = std::get_if<AxisDecl>(&it)) {
      if (!first) first = a;
      if (!labelled && (a->group || a->stream)) labelled = a;
      if (!grouped && a->group && *a->group > 1) grouped = a;
    }
  return grouped ? grouped : labelled ? labelled : first;
}

}  // namespace

void write_labels(Diagram& k, const KernelPlan& plan, Directive::Kind kind) {
  if (kind == Directive::Kind::fuse) return;
  for (const auto& dir : plan.directives) {
    const bool weave_or_group = dir.kind == Directive::Kind::weave || dir.kind == Directive::Kind::group;
    if (dir.kind != kind && !(weave_or_group && (kind == Directive::Kind::weave || kind == Directive::Kind::group))) continue;
    if (dir.kind == Directive::Kind::warps) {
      if (AxisDecl* a = warp_axis(k)) a->warps = dir.size, a->warps_pingpong = dir.pingpong;
      continue;
    }
    for (const auto& name : dir.names) {
      AxisDecl& a = axis_of(k, name);
      switch (dir.kind) {
        case Directive::Kind::weave: a.group = 1; break;
        case Directive::Kind::group: a.group = dir.size; break;
        case Directive::Kind::stream:
          a.stream = dir.size;
          a.stream_twice = dir.passes == 2;
          break;
        case Directive::Kind::cluster: a.cluster = dir.size; break;
        default: break;
      }
    }
  }
}

void write_plan_labels(Diagram& k, const KernelPlan& plan) {
  for (auto kind : {Directive::Kind::group, Directive::Kind::stream, Directive::Kind::warps, Directive::Kind::cluster})
    write_labels(k, plan, kind);
}

std::optional<KernelPlan> plan_of(const Diagram& k, DiagnosticEngine& diags) {
  KernelPlan plan;
  plan.name = k.name;
  plan.loc = k.loc;
  Directive fuse, weave;
  fuse.kind = Directive::Kind::fuse;
  weave.kind = Directive::Kind::weave;
  for (const auto* s : k.statements()) fuse.names.push_back(s->name);
  std::vector<Directive> groups, streams, tail;
  const AxisDecl* warps = nullptr;
  bool ok = true;
  for (const auto* a : k.axes()) {
    if (a->group && *a->group == 1) weave.names.push_back(a->name);
    if (a->group && *a->group > 1) groups.push_back({Directive::Kind::group, {a->name}, {}, *a->group, 1, "", a->loc, false});
    if (a->stream) streams.push_back({Directive::Kind::stream, {a->name}, {}, *a->stream, a->stream_twice ? 2 : 1, "", a->loc, false});
    const SourceLoc at = a->label_loc.valid() ? a->label_loc : a->loc;
    if (a->cluster) {
      if (!a->group) {
        diags.error(at, "'cluster' on axis '" + a->name + "' of kernel '" + k.name +
                            "' needs a group label on the same axis: a cluster is of adjacent thread blocks along a grouped axis");
        ok = false;
      }
      tail.push_back({Directive::Kind::cluster, {a->name}, {}, *a->cluster, 1, "", a->loc, false});
    }
    if (a->warps) {
      if (warps) {
        diags.error(at, "kernel '" + k.name + "' has 'warps' on axes '" + warps->name + "' and '" + a->name +
                            "': a thread block has one warp count");
        ok = false;
      }
      warps = a;
    }
  }
  if (!ok) return std::nullopt;
  plan.directives.push_back(fuse);
  if (!weave.names.empty()) plan.directives.push_back(weave);
  plan.directives.insert(plan.directives.end(), groups.begin(), groups.end());
  plan.directives.insert(plan.directives.end(), streams.begin(), streams.end());
  if (warps) plan.directives.push_back({Directive::Kind::warps, {}, {}, *warps->warps, 1, "", warps->loc, warps->warps_pingpong});
  plan.directives.insert(plan.directives.end(), tail.begin(), tail.end());
  return plan;
}

std::vector<Diagram> labelled_kernels(const Program& p, const Diagram& d, const Schedule& s, const ModelOptions& opt) {
  auto weave = weave_analysis(p, d);
  std::vector<Diagram> out;
  for (const auto& plan : s.kernels) {
    out.push_back(kernel_diagram(p, d, weave, plan.fused(), plan.name, opt));
    write_plan_labels(out.back(), plan);
  }
  return out;
}

std::string print_labelled(const std::vector<Diagram>& diagrams) {
  File f;
  f.diagrams = diagrams;
  for (std::size_t i = 1; i < f.diagrams.size(); ++i) f.diagrams[i].trivia.leading = {std::nullopt};
  return print_file(f);
}

std::optional<Schedule> schedule_of(const std::vector<Diagram>& kernels, const std::string& name, const std::string& diagram,
                                    DiagnosticEngine& diags) {
  Schedule s;
  s.name = name;
  s.diagram = diagram;
  for (const auto& k : kernels)
    if (auto plan = plan_of(k, diags)) s.kernels.push_back(std::move(*plan));
  if (diags.has_errors()) return std::nullopt;
  return s;
}

}  // namespace napkin
