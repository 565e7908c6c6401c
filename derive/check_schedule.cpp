#include "derive/check_schedule.hpp"

#include "lower/options.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace napkin {

namespace {

/** Why statement `w` of the kernel `stmts` may not add its partial sums over `axis` into global
 *  memory by atomic adds (lemma atomic-sum), or empty: the lemma's conditions (atomic_problem),
 *  its output leaves the kernel and no fused statement reads it (it is complete only after every
 *  block), and another fused statement is woven over `axis` (a kernel of the contraction alone
 *  streams the axis instead: split-K on its own is derive-split-reduction's). */
std::string atomic_illegal(const Diagram& d, const ModelOptions& opt, const std::vector<const StatementWeave*>& stmts, const StatementWeave& w,
                           const std::string& axis, const std::set<std::string>& escaping) {
  // its storage dtype, as a kernel's own diagram (search.cpp kernel_view) declares it
  if (auto why = atomic_problem(w, axis, storage_dtype(d, w.statement->name, opt)); !why.empty()) return why;
  const std::string& name = w.statement->name;
  if (!escaping.count(name)) return "'" + name + "' does not leave the kernel";
  bool woven = false;
  for (const auto* o : stmts) {
    if (std::find(o->reads.begin(), o->reads.end(), name) != o->reads.end()) return "'" + o->statement->name + "' reads '" + name + "' in the same kernel";
    woven |= o->touches(axis) && o->role(axis) == AxisRole::woven;
  }
  if (!woven) return "no other fused statement is woven over " + axis;
  return {};
}

std::string partition_problem(const Diagram& d, const ModelOptions& opt, const std::vector<const StatementWeave*>& stmts, const std::string& axis,
                              const char* verb, const std::set<std::string>& escaping) {
  bool touched = false;
  for (const auto* w : stmts) {
    if (!w->touches(axis)) continue;
    touched = true;
    const RoleSource& r = w->roles.at(axis);
    if (r.role == AxisRole::reduced) {
      const std::string atomic = std::string(verb) == "group" ? atomic_illegal(d, opt, stmts, *w, axis, escaping) : "weave";
      if (atomic.empty()) continue;  // its blocks' partial sums meet in global memory (lemma atomic-sum)
      return std::string("cannot ") + verb + " '" + axis + "': it is reduced by " + std::string(op_name(r.op)) + " in '" +
             w->statement->name + "'; a group partition needs an axis every fused operation is woven over (stream it instead)" +
             (std::string(verb) == "group" ? ", or a reduction the blocks may add up by atomic adds (lemma atomic-sum: " + atomic + ")" : "");
    }
    if (r.role == AxisRole::normalised)
      return std::string("cannot ") + verb + " '" + axis + "': " + std::string(op_name(r.op)) + " in '" +
             w->statement->name + "' couples the elements along it; a group partition needs an axis every fused operation is woven over";
  }
  if (!touched) return std::string("cannot ") + verb + " '" + axis + "': no fused statement has this axis";
  return {};
}

}  // namespace

bool groupable_axis(const Diagram& d, const ModelOptions& opt, const std::vector<const StatementWeave*>& stmts, const std::string& axis,
                    const std::set<std::string>& escaping) {
  return partition_problem(d, opt, stmts, axis, "group", escaping).empty();
}

std::set<std::string> escaping_arrays(const Diagram& d, const std::vector<const StatementWeave*>& mine,
                                      const std::vector<StatementWeave>& all) {
  std::set<std::string> names, out;
  for (const auto* w : mine) names.insert(w->statement->name);
  for (const auto& w : all)
    if (!names.count(w.statement->name))
      for (const auto& r : w.reads)
        if (names.count(r)) out.insert(r);
  for (const auto* o : d.outputs())
    if (names.count(o->name)) out.insert(o->name);
  return out;
}

std::string kernel_illegal(const Diagram& d, const ModelOptions& opt, const std::vector<const StatementWeave*>& stmts, const KernelPlan& k,
                           const std::set<std::string>& escaping, std::vector<LemmaUse>* lemmas) {
  for (const auto& dir : k.directives) {
    if (dir.kind == Directive::Kind::group || dir.kind == Directive::Kind::weave)
      for (const auto& a : dir.names)
        if (auto why = partition_problem(d, opt, stmts, a, dir.kind == Directive::Kind::group ? "group" : "weave", escaping); !why.empty())
          return why;
  }
  auto streams = k.streams();
  std::vector<LemmaUse> all;
  for (const auto& [axis, size] : streams) {
    bool touched = false;
    for (const auto* w : stmts) touched |= w->touches(axis);
    if (!touched) return "cannot stream '" + axis + "': no fused statement has this axis";
    if (k.group(axis)) return "cannot stream '" + axis + "': it is also grouped";
    StreamVerdict v = streamable(stmts, axis, escaping, k.stream_passes());
    if (!v.ok) return v.why;
    for (const auto& u : v.uses) {
      if (streams.size() > 1 && u.lemma != "elementwise" && u.lemma != "associative-sum" && u.lemma != "max-monoid")
        return "nested streams (over " + std::to_string(streams.size()) + " axes) fold only sums and maxima; '" + u.statement +
               "' needs the " + u.lemma + " lemma: stream one axis";
      if (std::none_of(all.begin(), all.end(), [&](const LemmaUse& x) { return x.statement == u.statement; })) all.push_back(u);
    }
  }
  if (streams.size() > 1 && k.stream_passes() == 2) return "a two-pass stream streams one axis";
  if (streams.size() > 1)  // an accumulator spans whole chunks of every other streamed axis: none may be woven
    for (const auto* w : stmts) {
      std::string reduced, woven, absent;
      for (const auto& [axis, size] : streams) {
        if (w->touches(axis)) (w->role(axis) == AxisRole::reduced ? reduced : woven) = axis;
        else absent = axis;
      }
      if (!reduced.empty() && !woven.empty())
        return "nested streams: '" + w->statement->name + "' reduces " + reduced + " but is woven over " + woven +
               ", also streamed; its accumulator would span every chunk of " + woven;
      // The loop nest walks every streamed axis; a fold independent of one of them would add the
      // same chunk once per chunk of it (random seed 3327: T0 = sum(X2; b) under streams b, c, d).
      if (!reduced.empty() && !absent.empty())
        return "nested streams: '" + w->statement->name + "' reduces " + reduced + " but does not depend on " + absent +
               ", also streamed; its accumulator would add each chunk of " + reduced + " once per chunk of " + absent +
               ": stream only the axes it reduces, or give it a kernel of its own";
    }
  if (lemmas) *lemmas = all;
  return {};
}

std::string call_illegal(const std::vector<const StatementWeave*>& stmts, const KernelPlan& k) {
  bool has_call = false;
  for (const auto* w : stmts) has_call |= w->has_call;
  if (has_call && (stmts.size() > 1 || k.directives.size() > 1))
    return "kernel '" + k.name + "' holds a call of another diagram: a call is scheduled by its own diagram's "
           "derivation; give it a kernel of its own with only 'fuse'";
  return {};
}

std::string warps_illegal(const Directive& warps) {
  if (warps.size > 32) return "at most 32 warps per thread block";
  if (warps.pingpong && warps.size != 8) return "'pingpong' needs 'warps 8': two consumer warpgroups that take the output tiles in turn";
  return "";
}

std::string cluster_illegal(const KernelPlan& k, const Directive& dir, const Hardware& hw, bool* on_axis) {
  const std::string& a = dir.names.at(0);
  if (on_axis) *on_axis = false;
  if (!hw.clusters) return hw.name + " has no thread-block clusters (features.clusters in its description)";
  if (dir.size != 2) return "clusters of 2 blocks only: the emitter splits the shared tiles' loads in two";
  if (k.find(Directive::Kind::cluster) != &dir) return "one 'cluster' line per kernel";
  if (!k.group(a) || *k.group(a) < 2) {
    if (on_axis) *on_axis = true;
    return "cluster along '" + a + "' needs 'group " + a + " by N' (N > 1): the cluster's blocks are adjacent tiles of '" + a + "'";
  }
  return {};
}

std::optional<CheckedSchedule> check_schedule(const Program& p, const Diagram& d, const Schedule& s,
                                              const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                              DiagnosticEngine& diags) {
  int before = diags.error_count();
  if (!s.diagram.empty() && s.diagram != d.name) {  // empty: the header line was bad, and said so
    diags.error(s.loc, "schedule '" + s.name + "' is for diagram '" + s.diagram + "', not '" + d.name + "'");
    return std::nullopt;
  }
  auto weave = weave_analysis(p, d);
  std::map<std::string, const StatementWeave*> by_name;
  for (const auto& w : weave) by_name[w.statement->name] = &w;
  std::map<std::string, std::size_t> kernel_of;
  for (std::size_t k = 0; k < s.kernels.size(); ++k)
    for (const auto& dir : s.kernels[k].directives) {
      if (dir.kind != Directive::Kind::fuse) continue;
      for (std::size_t i = 0; i < dir.names.size(); ++i) {
        const std::string& n = dir.names[i];
        if (!by_name.count(n)) {
          diags.error(dir.name_locs[i], "diagram '" + d.name + "' has no statement '" + n + "'" +
                                            (d.find_input(n) ? " (it is an input: inputs are not computed)" : ""));
          continue;
        }
        if (auto [it, fresh] = kernel_of.emplace(n, k); !fresh)
          diags.error(dir.name_locs[i], "'" + n + "' is already in kernel '" + s.kernels[it->second].name + "'");
      }
    }
  for (const auto& w : weave)
    if (!kernel_of.count(w.statement->name))
      diags.error(s.loc, "statement '" + w.statement->name + "' is in no kernel; add it to a 'fuse' line");
  if (diags.error_count() != before) return std::nullopt;

  CheckedSchedule out;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const KernelPlan& plan = s.kernels[k];
    std::vector<const StatementWeave*> mine;
    for (const auto& w : weave)
      if (kernel_of[w.statement->name] == k) mine.push_back(&w);
    if (mine.empty()) {
      diags.error(plan.loc, "kernel '" + plan.name + "' fuses no statement");
      continue;
    }
    for (const auto* w : mine)
      for (const auto& r : w->reads)
        if (kernel_of.count(r) && kernel_of[r] > k) {
          const Directive* f = plan.find(Directive::Kind::fuse, w->statement->name);
          diags.error(f ? f->loc : plan.loc, "kernel '" + plan.name + "' computes '" + w->statement->name + "', which reads '" + r +
                                                "', produced by the later kernel '" + s.kernels[kernel_of[r]].name +
                                                "'; kernels run in order and a fused set must not depend on itself through another kernel");
        }
    if (auto why = call_illegal(mine, plan); !why.empty()) {
      diags.error(plan.loc, why);
      continue;
    }
    auto escaping = escaping_arrays(d, mine, weave);
    int kernel_errors = diags.error_count();
    for (const auto& dir : plan.directives) {
      if (dir.kind == Directive::Kind::fuse) continue;
      if (dir.kind == Directive::Kind::cluster) {
        bool on_axis = false;
        if (auto why = cluster_illegal(plan, dir, hw, &on_axis); !why.empty()) diags.error(on_axis ? dir.name_locs.at(0) : dir.loc, why);
        continue;
      }
      KernelPlan one;
      one.directives = {dir};
      std::vector<LemmaUse> uses;
      if (auto why = kernel_illegal(d, opt, mine, one, escaping, &uses); !why.empty()) diags.error(dir.loc, why);
      if (dir.kind == Directive::Kind::warps)
        if (auto why = warps_illegal(dir); !why.empty()) diags.error(dir.loc, why);
    }
    std::vector<LemmaUse> uses;
    std::string why = kernel_illegal(d, opt, mine, plan, escaping, &uses);
    if (!why.empty()) {
      if (diags.error_count() == kernel_errors) {  // a rule about directives together (stream and group of one axis)
        const Directive* st = plan.find(Directive::Kind::stream);
        diags.error(st ? st->loc : plan.loc, why);
      }
      continue;
    }
    out.lemmas.push_back(uses);
  }
  if (diags.error_count() != before) return std::nullopt;

  out.cost = cost_schedule(p, d, s, sizes, hw, opt);
  for (std::size_t k = 0; k < s.kernels.size(); ++k)
    for (const auto& problem : out.cost.kernels[k].problems)
      diags.error(s.kernels[k].loc, "kernel '" + s.kernels[k].name + "': " + problem);
  if (diags.error_count() != before) return std::nullopt;
  return out;
}

}  // namespace napkin
