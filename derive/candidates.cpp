// Schedules near a derived one (contract in candidates.hpp).
#include "derive/candidates.hpp"

#include <algorithm>
#include <set>

#include "derive/check_schedule.hpp"

namespace napkin {

namespace {

/** `s` with kernel `k`'s directives replaced by `dirs`. */
Schedule with_kernel(const Schedule& s, std::size_t k, std::vector<Directive> dirs) {
  Schedule out = s;
  out.kernels[k].directives = std::move(dirs);
  return out;
}

/** The schedules one move away from `s` (candidates.hpp). */
std::vector<Schedule> neighbours(const Schedule& s) {
  std::vector<Schedule> out;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const std::vector<Directive>& dirs = s.kernels[k].directives;
    bool has_warps = false, has_cluster = false;
    std::string first_grouped;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
      const Directive& dir = dirs[i];
      auto resized = [&](std::int64_t size) {
        std::vector<Directive> v = dirs;
        v[i].size = size;
        out.push_back(with_kernel(s, k, v));
      };
      switch (dir.kind) {
        case Directive::Kind::group: case Directive::Kind::stream:
          if (dir.kind == Directive::Kind::group && dir.size > 1 && first_grouped.empty()) first_grouped = dir.names.at(0);
          resized(dir.size * 2);
          if (dir.size % 2 == 0) resized(dir.size / 2);
          break;
        case Directive::Kind::warps: {
          has_warps = true;
          std::vector<Directive> v = dirs;
          v[i].size = dir.size == 8 ? 4 : 8, v[i].pingpong = false;
          out.push_back(with_kernel(s, k, v));
          if (dir.size == 8) {  // the two consumers splitting each tile, or taking the tiles in turn
            v = dirs;
            v[i].pingpong = !dir.pingpong;
            out.push_back(with_kernel(s, k, v));
          }
          break;
        }
        case Directive::Kind::cluster: {
          has_cluster = true;
          std::vector<Directive> v = dirs;
          v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
          out.push_back(with_kernel(s, k, v));
          break;
        }
        default: break;
      }
    }
    if (!has_warps) {
      std::vector<Directive> v = dirs;
      Directive w;
      w.kind = Directive::Kind::warps, w.size = 8;
      v.push_back(w);
      out.push_back(with_kernel(s, k, v));
    }
    if (!has_cluster && !first_grouped.empty()) {
      std::vector<Directive> v = dirs;
      Directive c;
      c.kind = Directive::Kind::cluster, c.names = {first_grouped}, c.name_locs = {SourceLoc{}}, c.size = 2;
      v.push_back(c);
      out.push_back(with_kernel(s, k, v));
    }
  }
  return out;
}

}  // namespace

std::vector<SearchResult> candidate_schedules(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                                              const Schedule& start, std::size_t n, const ModelOptions& opt) {
  std::vector<SearchResult> found;
  std::set<std::string> seen;
  auto consider = [&](const Schedule& s, bool required) {
    if (!seen.insert(print_schedule(s)).second) return false;
    DiagnosticEngine diags;
    auto checked = check_schedule(p, d, s, sizes, hw, opt, diags);
    if (!checked) {
      if (required) throw UserError("the schedule to start the candidates from does not check:\n" + diags.render());
      return false;
    }
    // a pingpong no kernel takes (no gemm on wgmma) is the same kernel as without it: not a candidate
    const std::vector<KernelCost>& kernels = checked->cost.kernels;  // one per kernel of s, in order
    for (std::size_t i = 0; !required && i < s.kernels.size() && i < kernels.size(); ++i)
      if (s.kernels[i].pingpong() && !(kernels[i].spec->gemm && kernels[i].spec->wgmma)) return false;
    found.push_back(result_of(s, *checked));
    return true;
  };
  consider(start, true);
  std::vector<Schedule> frontier{start};
  for (int round = 0; round < 2; ++round) {
    std::vector<Schedule> next;
    for (const auto& s : frontier)
      for (const auto& m : neighbours(s))
        if (consider(m, false)) next.push_back(m);
    frontier = std::move(next);
  }
  std::stable_sort(found.begin(), found.end(), [](const SearchResult& a, const SearchResult& b) { return a.cost.t_total < b.cost.t_total; });
  if (found.size() > std::max<std::size_t>(n, 1)) found.resize(std::max<std::size_t>(n, 1));
  return found;
}

}  // namespace napkin
