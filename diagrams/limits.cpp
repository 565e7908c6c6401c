#include "diagrams/limits.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <vector>

#include "diagrams/graph_view.hpp"
#include "diagrams/program.hpp"

namespace napkin {

namespace {

struct CallSite {
  std::size_t callee;
  SourceLoc loc;
};

/** "a -> b -> ... -> y -> z": the first two and last two names of a long chain. */
std::string chain_text(const std::vector<std::string>& chain) {
  std::string s;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    if (chain.size() > 6 && i == 2) {
      s += " -> ...";
      i = chain.size() - 3;
      continue;
    }
    s += (i ? " -> " : "") + chain[i];
  }
  return s;
}

}  // namespace

void check_call_depth(const Program& p, DiagnosticEngine& diags) {
  std::vector<const Diagram*> diagrams;
  std::map<std::string, std::size_t> index;
  for (const auto& [name, d] : p.diagrams) {
    index[name] = diagrams.size();
    diagrams.push_back(d);
  }
  const std::size_t n = diagrams.size();
  std::vector<std::vector<CallSite>> calls(n);
  std::vector<int> callers(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (const auto* s : diagrams[i]->statements())
      walk(*s->expr, [&](const Expr& e) {
        if (e.kind != Expr::Kind::apply || e.op != Op::call) return;
        if (auto it = index.find(e.callee); it != index.end()) {
          calls[i].push_back({it->second, e.loc});
          ++callers[it->second];
        }
      });
  // Callers before callees (Kahn's algorithm, iterative): level = the longest chain of calls from
  // a diagram nobody calls; parent = the caller on that chain.
  std::vector<int> level(n, 0);
  std::vector<std::ptrdiff_t> parent(n, -1);
  std::deque<std::size_t> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (callers[i] == 0) ready.push_back(i);
  std::size_t done = 0;
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    std::size_t d = ready.front();
    ready.pop_front();
    order.push_back(d);
    ++done;
    for (const auto& c : calls[d]) {
      if (level[d] + 1 > level[c.callee]) level[c.callee] = level[d] + 1, parent[c.callee] = static_cast<std::ptrdiff_t>(d);
      if (--callers[c.callee] == 0) ready.push_back(c.callee);
    }
  }
  if (done != n) return;  // a cycle through composition: reported by verify
  // Calls in the expanded call tree below each diagram (a call of a call counts again), callees
  // first; saturated past the limit. Reported where a diagram first passes it.
  std::vector<double> expanded(n, 0);
  for (std::size_t k = n; k-- > 0;) {
    std::size_t d = order[k];
    for (const auto& c : calls[d]) expanded[d] += 1 + expanded[c.callee];
    expanded[d] = std::min(expanded[d], 2.0 * kMaxExpandedCalls);
    if (expanded[d] <= kMaxExpandedCalls) continue;
    bool below = std::all_of(calls[d].begin(), calls[d].end(), [&](const CallSite& c) { return expanded[c.callee] <= kMaxExpandedCalls; });
    if (below && !calls[d].empty())
      diags.error(calls[d].front().loc, "calls expand too much: diagram '" + diagrams[d]->name + "' makes more than " +
                                            std::to_string(kMaxExpandedCalls) +
                                            " calls, counting each call inside a called diagram once per call of it; call fewer "
                                            "diagrams or share their results");
  }
  for (std::size_t d : order) {
    if (level[d] != kMaxCallDepth) continue;  // deeper ones follow from this one
    std::vector<std::string> chain;
    for (auto v = static_cast<std::ptrdiff_t>(d); v >= 0; v = parent[static_cast<std::size_t>(v)])
      chain.push_back(diagrams[static_cast<std::size_t>(v)]->name);
    std::reverse(chain.begin(), chain.end());
    for (const auto& c : calls[d]) {
      auto here = chain;
      here.push_back(diagrams[c.callee]->name);
      diags.error(c.loc, "calls nested too deeply: this call of '" + diagrams[c.callee]->name + "' is the " +
                             std::to_string(kMaxCallDepth + 1) + "th nested call (" + chain_text(here) + "); at most " +
                             std::to_string(kMaxCallDepth) + " calls may nest");
    }
  }
}

}  // namespace napkin
