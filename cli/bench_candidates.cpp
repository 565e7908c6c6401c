// napkin bench --candidates (contract in bench_candidates.hpp).
#include "cli/bench_candidates.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "derive/candidates.hpp"

namespace napkin::cli {

namespace {

/** One line per kernel: its directives but `fuse`, `;`-separated. */
std::string summary(const Schedule& s) {
  std::string out;
  for (const auto& k : s.kernels) {
    std::string dirs;
    for (const auto& dir : k.directives)
      if (dir.kind != Directive::Kind::fuse) dirs += (dirs.empty() ? "" : ", ") + directive_text(dir);
    out += (out.empty() ? "" : " | ") + k.name + ": " + dirs;
  }
  return out;
}

/** Spearman's rank correlation of the predicted order (1..n) with the measured times. */
double spearman(const std::vector<double>& measured) {
  const std::size_t n = measured.size();
  if (n < 2) return 1;
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return measured[a] < measured[b]; });
  double d2 = 0;
  for (std::size_t r = 0; r < n; ++r) d2 += std::pow(static_cast<double>(r) - static_cast<double>(order[r]), 2);
  const double nn = static_cast<double>(n);
  return 1 - 6 * d2 / (nn * (nn * nn - 1));
}

/** The candidates' runs in `base` and the report (bench_candidates). */
int bench_in_folder(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt,
                    const std::vector<SearchResult>& cands, const std::string& base) {
  std::vector<double> measured, clocks;
  std::string device;
  bool all_pass = true;
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    BenchOptions o = opt;
    o.schedule = cands[i];
    o.json = false;
    o.workdir = base + "/candidate-" + std::to_string(i + 1);
    std::cerr << fmt::format("napkin bench --candidates: {} of {} ...\n", i + 1, cands.size());
    const BenchResult r = measure_bench(p, d, sizes, hw, o);
    device = r.device;
    all_pass = all_pass && r.pass;
    measured.push_back(r.seconds);
    clocks.push_back(r.clock_mhz);
    const double err = r.seconds > 0 ? r.predicted_s / r.seconds - 1 : 0;
    rows.push_back({{"rank", i + 1}, {"schedule", summary(cands[i].schedule)}, {"predicted_s", r.predicted_s}, {"measured_s", r.seconds},
                    {"pass", r.pass}, {"max_rel_err", r.max_rel_err}, {"error", err}, {"sm_clock_mhz", r.clock_mhz}});
    lines.push_back(fmt::format("  {:>4}  {:>10.1f} us  {:>10.1f} us  {:>+6.1f}%  {:>5.0f}  {:<5}  {}", i + 1, r.predicted_s * 1e6, r.seconds * 1e6, err * 100,
                                r.clock_mhz, r.pass ? "ok" : "FAIL", summary(cands[i].schedule)));
  }
  const auto fastest = std::min_element(measured.begin(), measured.end());
  const std::size_t fastest_rank = static_cast<std::size_t>(fastest - measured.begin()) + 1;
  const double slower = measured.front() / *fastest - 1;
  const double rho = spearman(measured);
  if (opt.json) {
    nlohmann::json j{{"diagram", d.name}, {"device", device}, {"candidates", rows}, {"first_choice_s", measured.front()},
                     {"fastest_s", *fastest}, {"fastest_rank", fastest_rank}, {"first_choice_slower_by", slower}, {"spearman", rho}};
    std::cout << j.dump(2) << "\n";
    return all_pass ? 0 : 1;
  }
  std::cout << fmt::format("napkin bench --candidates: {} on {}, {} schedules near the derived one, ranked by the model ({})\n", d.name, device,
                           cands.size(), hw.name);
  std::cout << fmt::format("  {:>4}  {:>13}  {:>13}  {:>7}  {:>5}  {:<5}  {}\n", "rank", "predicted", "measured", "model", "MHz", "check", "schedule");
  for (const auto& line : lines) std::cout << line << "\n";
  std::cout << fmt::format("  the model's first choice: {:.1f} us measured; the fastest measured: {:.1f} us (rank {}); first choice {:.1f}% slower\n",
                           measured.front() * 1e6, *fastest * 1e6, fastest_rank, slower * 100);
  std::cout << fmt::format("  ranking: Spearman rho {:.2f} between the predicted and the measured order over {} schedules\n", rho, cands.size());
  // Each candidate is a run of its own: later ones may meet a GPU the earlier ones heated (the
  // median SM clock of each run's rounds is the MHz column; session 46, H200: 1470-1980 MHz).
  const auto [lo, hi] = std::minmax_element(clocks.begin(), clocks.end());
  if (*lo > 0 && (*hi - *lo) / *hi > ClockSummary::kClockDrift)
    std::cout << fmt::format("  note: the candidates ran at median SM clocks from {:.0f} to {:.0f} MHz: compare them with care\n", *lo, *hi);
  return all_pass ? 0 : 1;
}

}  // namespace

int bench_candidates(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt, std::size_t n) {
  const Derivation dv = derive(p, d, sizes, hw);
  // Where derive rewrote the diagram before its search, the candidates are schedules of that
  // rewrite, and each carries it (SearchResult::rewritten) for derive_given.
  std::vector<SearchResult> cands = candidate_schedules(p, dv.diagram(d), sizes, hw, dv.chosen.schedule, n);
  for (auto& c : cands) c.rewritten = dv.rewritten;
  const std::string base = opt.workdir.empty() ? "napkin-bench-" + d.name + "-candidates" : opt.workdir;
  const bool created = !std::filesystem::exists(base);
  std::filesystem::create_directories(base);
  try {
    return bench_in_folder(p, d, sizes, hw, opt, cands, base);
  } catch (...) {
    std::error_code ec;  // a folder this run made, left empty by the failed candidate's own clean-up, goes too
    if (created && std::filesystem::is_empty(base, ec)) std::filesystem::remove(base, ec);
    throw;
  }
}

}  // namespace napkin::cli
