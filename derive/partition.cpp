#include "derive/partition.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <queue>

#include "diagrams/diagnostics.hpp"

namespace napkin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/** A partial solution: the score and HBM bytes of the rest, and the first kernel (index + 1, or 0). */
struct Best {
  double score = kInf, hbm = kInf;
  std::size_t pick = 0;
};

/** Keeps `v, hbm` in `b` when better: lower by more than the tolerance, or within it and fewer
 *  HBM bytes (partitions within the model's resolution go to the one moving less). */
void consider(Best& b, double v, double hbm, std::size_t pick, double tolerance) {
  if (v < b.score * (1 - tolerance) || (v <= b.score * (1 + tolerance) && hbm < b.hbm)) b = {v, hbm, pick};
}

}  // namespace

Partitioner::Partitioner(PartitionGraph g) : g_(std::move(g)) {
  const std::size_t n = g_.statements;
  if (n <= kExactStatements) {
    reaches_.assign(n, std::vector<bool>(n, false));
    for (bool changed = true; changed;) {  // transitive closure of "reads" (n is small)
      changed = false;
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t p : g_.preds[i]) {
          if (!reaches_[p][i]) reaches_[p][i] = changed = true;
          for (std::size_t q = 0; q < n; ++q)
            if (reaches_[q][p] && !reaches_[q][i]) reaches_[q][i] = changed = true;
        }
    }
    exact_ = exact_candidates().size() <= kExactCandidates;
    if (exact_) return;
    restricted_ = true;
  }
  // Kahn's algorithm, the lowest ready index first: source order when that is topological.
  std::vector<std::size_t> waiting(n, 0);
  std::vector<std::vector<std::size_t>> succs(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t p : g_.preds[i]) ++waiting[i], succs[p].push_back(i);
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(i);
  while (!ready.empty()) {
    std::size_t i = ready.top();
    ready.pop();
    order_.push_back(i);
    for (std::size_t s : succs[i])
      if (--waiting[s] == 0) ready.push(s);
  }
  NAPKIN_ASSERT(order_.size() == n) << "partition search over a cyclic dataflow";
}

bool Partitioner::connected(const std::vector<std::size_t>& members) const {
  std::vector<bool> seen(members.size(), false);
  std::vector<std::size_t> stack{0};
  seen[0] = true;
  std::size_t reached = 1;
  while (!stack.empty()) {
    std::size_t a = stack.back();
    stack.pop_back();
    for (std::size_t b = 0; b < members.size(); ++b)
      if (!seen[b] && g_.linked(members[a], members[b])) seen[b] = true, ++reached, stack.push_back(b);
  }
  return reached == members.size();
}

bool Partitioner::convex(std::uint64_t mask) const {
  for (std::size_t o = 0; o < g_.statements; ++o) {
    if (mask >> o & 1) continue;
    bool from = false, to = false;
    for (std::size_t i = 0; i < g_.statements; ++i)
      if (mask >> i & 1) from |= reaches_[i][o], to |= reaches_[o][i];
    if (from && to) return false;
  }
  return true;
}

bool Partitioner::admissible(const std::vector<std::size_t>& m) const {
  if (m.size() == 1) return true;
  for (std::size_t i : m)
    if (g_.alone[i]) return false;
  return connected(m);
}

std::vector<PartitionCandidate> Partitioner::exact_candidates() const {
  std::vector<PartitionCandidate> out;
  const std::size_t n = g_.statements;
  for (std::uint64_t mask = 1; mask < (std::uint64_t{1} << n); ++mask) {  // ascending: ties go to lower masks
    std::vector<std::size_t> m;
    for (std::size_t i = 0; i < n; ++i)
      if (mask >> i & 1) m.push_back(i);
    if (admissible(m) && convex(mask)) out.push_back({std::move(m), 0, 0});
  }
  return out;
}

std::vector<PartitionCandidate> Partitioner::candidates() const {
  if (exact_) return exact_candidates();
  std::vector<PartitionCandidate> out = segment_candidates();
  if (!restricted_) return out;
  for (auto& c : closure_candidates())
    if (std::none_of(out.begin(), out.end(), [&](const PartitionCandidate& o) { return o.members == c.members; })) out.push_back(std::move(c));
  return out;
}

std::vector<PartitionCandidate> Partitioner::closure_candidates() const {
  const std::size_t n = g_.statements;
  std::vector<PartitionCandidate> out;
  if (g_.axes.size() != n || g_.reduces.size() != n) return out;
  auto touches = [&](std::size_t i, const std::string& a) { return std::find(g_.axes[i].begin(), g_.axes[i].end(), a) != g_.axes[i].end(); };
  auto add = [&](std::uint64_t mask) {
    std::vector<std::size_t> m;
    for (std::size_t i = 0; i < n; ++i)
      if (mask >> i & 1) m.push_back(i);
    if (m.size() < 2 || !admissible(m) || !convex(mask)) return;
    if (std::none_of(out.begin(), out.end(), [&](const PartitionCandidate& o) { return o.members == m; })) out.push_back({std::move(m), 0, 0});
  };
  std::map<std::string, std::vector<std::uint64_t>> by_axis;
  for (std::size_t r = 0; r < n; ++r) {
    if (!g_.reduces[r] || g_.alone[r]) continue;
    for (const auto& a : g_.axes[r]) {
      std::uint64_t mask = std::uint64_t{1} << r;
      std::vector<std::size_t> stack{r};
      while (!stack.empty()) {  // producers through statements touching a
        const std::size_t i = stack.back();
        stack.pop_back();
        for (std::size_t p : g_.preds[i])
          if (!(mask >> p & 1) && !g_.alone[p] && touches(p, a)) mask |= std::uint64_t{1} << p, stack.push_back(p);
      }
      add(mask);
      by_axis[a].push_back(mask);
    }
  }
  for (auto& [a, masks] : by_axis) {  // unions along one axis: of each overlapping pair, and of each overlapping group
    for (std::size_t i = 0; i < masks.size(); ++i)
      for (std::size_t j = i + 1; j < masks.size(); ++j)
        if (masks[i] & masks[j]) add(masks[i] | masks[j]);
    for (bool merged = true; merged;) {
      merged = false;
      for (std::size_t i = 0; i < masks.size() && !merged; ++i)
        for (std::size_t j = i + 1; j < masks.size() && !merged; ++j)
          if (masks[i] & masks[j]) {
            masks[i] |= masks[j];
            masks.erase(masks.begin() + static_cast<std::ptrdiff_t>(j));
            merged = true;
          }
    }
    for (std::uint64_t m : masks) add(m);
  }
  return out;
}

std::vector<PartitionCandidate> Partitioner::segment_candidates() const {
  std::vector<PartitionCandidate> out;
  const std::size_t n = g_.statements;
  for (std::size_t start = 0; start < n; ++start)
    for (std::size_t len = 1; len <= kMaxSegment && start + len <= n; ++len) {
      std::vector<std::size_t> m(order_.begin() + static_cast<std::ptrdiff_t>(start),
                                 order_.begin() + static_cast<std::ptrdiff_t>(start + len));
      std::sort(m.begin(), m.end());
      if (admissible(m)) out.push_back({std::move(m), 0, 0});
    }
  return out;
}

std::vector<std::size_t> Partitioner::best(const std::vector<PartitionCandidate>& priced, double tolerance) const {
  return exact() || restricted() ? best_exact(priced, tolerance) : best_segments(priced, tolerance);
}

std::vector<std::size_t> Partitioner::best_exact(const std::vector<PartitionCandidate>& priced, double tolerance) const {
  const std::size_t n = g_.statements;
  const std::uint64_t all = (std::uint64_t{1} << n) - 1;
  std::vector<std::uint64_t> mask(priced.size(), 0), needs(priced.size(), 0);
  for (std::size_t c = 0; c < priced.size(); ++c)
    for (std::size_t i : priced[c].members) {
      mask[c] |= std::uint64_t{1} << i;
      for (std::size_t p : g_.preds[i]) needs[c] |= std::uint64_t{1} << p;
    }
  // covered -> the best rest; recursion depth at most n (<= kExactStatements).
  std::map<std::uint64_t, Best> memo;
  std::function<Best(std::uint64_t)> solve = [&](std::uint64_t covered) -> Best {
    if (covered == all) return {0, 0, 0};
    if (auto it = memo.find(covered); it != memo.end()) return it->second;
    Best b;
    for (std::size_t c = 0; c < priced.size(); ++c) {
      if (mask[c] & covered) continue;
      if ((needs[c] & ~mask[c] & ~covered) != 0) continue;  // not ready: a producer runs later
      if (priced[c].score == kInf) continue;
      Best rest = solve(covered | mask[c]);
      consider(b, priced[c].score + rest.score, priced[c].hbm + rest.hbm, c + 1, tolerance);
    }
    memo[covered] = b;
    return b;
  };
  if (solve(0).score == kInf) return {};
  std::vector<std::size_t> path;
  for (std::uint64_t covered = 0; covered != all;) {
    std::size_t pick = memo.at(covered).pick;
    if (pick == 0) return {};
    path.push_back(pick - 1);
    covered |= mask[pick - 1];
  }
  return path;
}

std::vector<std::size_t> Partitioner::best_segments(const std::vector<PartitionCandidate>& priced, double tolerance) const {
  const std::size_t n = g_.statements;
  std::vector<std::size_t> position(n);
  for (std::size_t p = 0; p < n; ++p) position[order_[p]] = p;
  std::vector<std::vector<std::size_t>> starting(n);  // candidates by the position of their first statement
  for (std::size_t c = 0; c < priced.size(); ++c) {
    std::size_t first = n;
    for (std::size_t i : priced[c].members) first = std::min(first, position[i]);
    starting[first].push_back(c);
  }
  std::vector<Best> rest(n + 1);
  rest[n] = {0, 0, 0};
  for (std::size_t p = n; p-- > 0;) {
    for (std::size_t c : starting[p]) {
      const Best& after = rest[p + priced[c].members.size()];
      if (priced[c].score == kInf || after.score == kInf) continue;
      consider(rest[p], priced[c].score + after.score, priced[c].hbm + after.hbm, c + 1, tolerance);
    }
  }
  if (rest[0].score == kInf) return {};
  std::vector<std::size_t> path;
  for (std::size_t p = 0; p < n;) {
    std::size_t c = rest[p].pick - 1;
    path.push_back(c);
    p += priced[c].members.size();
  }
  return path;
}

}  // namespace napkin
