#include "tests/support/random_schedule.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "diagrams/weave.hpp"

namespace napkin::test {

namespace {

class ScheduleGenerator {
 public:
  ScheduleGenerator(std::uint64_t seed, const SizeMap& sizes) : rng_(seed), sizes_(sizes) {}

  std::string run(std::uint64_t seed, const Program& p, const Diagram& d) {
    const std::vector<StatementWeave> weaves = weave_analysis(p, d);
    const std::vector<const StatementWeave*> order = dataflow_order(weaves);
    std::vector<std::vector<const StatementWeave*>> kernels = cut(order);
    if (kernels.size() > 1 && chance(0.04)) std::swap(kernels[0], kernels[1]);  // out of dataflow order
    std::string text = "schedule s" + std::to_string(seed) + " for " + d.name + "\n";
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      text += "kernel k" + std::to_string(k) + "\n  fuse ";
      for (std::size_t i = 0; i < kernels[k].size(); ++i) text += (i ? ", " : "") + kernels[k][i]->statement->name;
      text += "\n";
      const bool call = std::any_of(kernels[k].begin(), kernels[k].end(), [](const auto* w) { return w->has_call; });
      if (!call || chance(0.1)) text += directives(kernels[k], d);
    }
    return text;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  /** The statements in dataflow order: item order, each after the statements it reads. */
  static std::vector<const StatementWeave*> dataflow_order(const std::vector<StatementWeave>& weaves) {
    std::map<std::string, const StatementWeave*> by_name;
    for (const auto& w : weaves) by_name[w.statement->name] = &w;
    std::vector<const StatementWeave*> order;
    std::set<std::string> placed, visiting;
    auto visit = [&](auto&& self, const StatementWeave* w) -> void {
      const std::string& n = w->statement->name;
      if (placed.count(n) || !visiting.insert(n).second) return;
      for (const auto& r : w->reads)
        if (by_name.count(r)) self(self, by_name.at(r));
      placed.insert(n);
      order.push_back(w);
    };
    for (const auto& w : weaves) visit(visit, &w);
    return order;
  }

  /** Contiguous cuts: one kernel for all, or a cut at each gap with some chance (calls mostly alone). */
  std::vector<std::vector<const StatementWeave*>> cut(const std::vector<const StatementWeave*>& order) {
    std::vector<std::vector<const StatementWeave*>> kernels(1);
    const bool one = chance(0.25);
    const double p = 0.2 + 0.6 * std::uniform_real_distribution<double>(0, 1)(rng_);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const bool around_call = order[i]->has_call || (i > 0 && order[i - 1]->has_call);
      const bool split = i > 0 && (one ? around_call && chance(0.5) : around_call ? chance(0.9) : chance(p));
      if (split) kernels.emplace_back();
      kernels.back().push_back(order[i]);
    }
    return kernels;
  }

  /** A partition size for an axis of n elements: 1, a divisor, or any size up to n + 2. */
  std::int64_t size_for(std::int64_t n) {
    const int form = pick(0, 3);
    if (form == 0) return 1;
    if (form == 1) {
      std::vector<std::int64_t> divisors;
      for (std::int64_t k = 1; k <= n; ++k)
        if (n % k == 0) divisors.push_back(k);
      return divisors[static_cast<std::size_t>(pick(0, static_cast<int>(divisors.size()) - 1))];
    }
    return pick(1, static_cast<int>(std::min<std::int64_t>(n + 2, 64)));
  }

  /** Random directives over the axes the kernel's statements touch (now and then one it does not). */
  std::string directives(const std::vector<const StatementWeave*>& stmts, const Diagram& d) {
    std::vector<std::string> touched;
    for (const auto* a : d.axes())
      for (const auto* w : stmts)
        if (w->touches(a->name)) {
          touched.push_back(a->name);
          break;
        }
    if (chance(0.08) && !d.axes().empty()) {
      const std::string other = d.axes()[static_cast<std::size_t>(pick(0, static_cast<int>(d.axes().size()) - 1))]->name;
      if (std::find(touched.begin(), touched.end(), other) == touched.end()) touched.push_back(other);
    }
    std::string text;
    std::vector<std::string> streams;
    const double p_stream = chance(0.5) ? 0.45 : 0.2;
    // An informed kernel groups only axes every statement is woven over and streams only axes
    // some statement reduces or normalises: more of them are legal, with partitions that matter.
    const bool informed = chance(0.6);
    for (const auto& a : touched) {
      const std::int64_t n = sizes_.count(a) ? sizes_.at(a) : 4;
      double r = std::uniform_real_distribution<double>(0, 1)(rng_);
      if (informed) {
        bool all_woven = true, coupled = false;
        for (const auto* w : stmts) {
          all_woven &= w->touches(a) && w->role(a) == AxisRole::woven;
          coupled |= w->touches(a) && w->role(a) != AxisRole::woven;
        }
        if (all_woven) r = r < 0.3 ? r / 2 : r < 0.8 ? 0.15 + (r - 0.3) * 0.6 : 1;    // weave, group, or nothing
        else if (coupled) r = r < 0.7 ? 0.45 + r / 0.7 * p_stream * 0.99 : 1;    // stream, or nothing
        else r = 1;
      }
      if (r < 0.15) text += "  weave " + a + "\n";
      else if (r < 0.45) text += "  group " + a + " by " + std::to_string(size_for(n)) + "\n";
      else if (r < 0.45 + p_stream) streams.push_back("  stream " + a + " by " + std::to_string(size_for(n)));
      else if (r < 0.5 + p_stream && chance(0.3)) {  // grouped and streamed: refused
        text += "  group " + a + " by " + std::to_string(size_for(n)) + "\n";
        streams.push_back("  stream " + a + " by " + std::to_string(size_for(n)));
      }
    }
    std::shuffle(streams.begin(), streams.end(), rng_);
    if (streams.size() > 3 && chance(0.7)) streams.resize(static_cast<std::size_t>(pick(1, 3)));
    const bool twice = !streams.empty() && chance(streams.size() == 1 ? 0.35 : 0.08);
    for (std::size_t i = 0; i < streams.size(); ++i) text += streams[i] + (twice && i + 1 == streams.size() ? " twice" : "") + "\n";
    if (chance(0.3)) {
      static const int warps[] = {1, 2, 4, 8, 16, 33};
      text += "  warps " + std::to_string(warps[pick(0, 5)]) + "\n";
    }
    return text;
  }

  std::mt19937_64 rng_;
  const SizeMap& sizes_;
};

}  // namespace

std::string random_schedule(std::uint64_t seed, const Program& p, const Diagram& d, const SizeMap& sizes) {
  return ScheduleGenerator(seed, sizes).run(seed, p, d);
}

}  // namespace napkin::test
