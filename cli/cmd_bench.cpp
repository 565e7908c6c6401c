// napkin bench: build, check and time the derived (or, with --schedule, a given) schedule's kernels on this GPU, against the
// unfused schedule and cuBLAS measured in the same run (kernels/bench.hpp); with --candidates N, the N best-predicted
// schedules near the derived one, predicted beside measured (cli/bench_candidates.hpp).
#include "cli/bench_candidates.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "kernels/bench.hpp"

namespace napkin::cli {

Runner setup_bench(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto hw = std::make_shared<std::string>("h100");
  auto opt = std::make_shared<BenchOptions>();
  auto format = std::make_shared<std::string>("text");
  auto arch = std::make_shared<std::string>("sm_90a");
  auto schedule = std::make_shared<std::string>();
  auto candidates = std::make_shared<int>(0);
  args->add_to(sub);
  auto* sched_opt = sub.add_option("--schedule", *schedule, "Bench this schedule file (checked first) instead of the derived schedule");
  sub.add_option("--candidates", *candidates,
                 "Bench the N best-predicted schedules near the derived one and print predicted beside measured (derive/candidates.hpp)")
      ->check(CLI::Range(2, 100))
      ->excludes(sched_opt);
  sub.add_option("--hw", *hw, "Hardware description the schedule is derived and predicted for")->capture_default_str();
  sub.add_option("--arch", *arch, "GPU architecture to compile for: sm_80, sm_90a, ...")->capture_default_str();
  sub.add_option("--runs", opt->runs, "Timed runs per measurement (median; at least 20)")->capture_default_str()->check(CLI::Range(20, 100000));
  sub.add_option("--seed", opt->seed, "Seed of the random inputs")->capture_default_str()->check(seed_value());
  sub.add_option("--workdir", opt->workdir, "Folder for the generated sources, binary and logs (default: napkin-bench-<diagram>)");
  sub.add_option("--nvcc", opt->nvcc, "CUDA compiler")->capture_default_str();
  sub.add_option("--format", *format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  return [=] {
    auto l = load_checked(*args);
    if (!l) return 1;
    BenchOptions o = *opt;
    const Hardware h = load_hardware(*hw);
    if (!schedule->empty() && !(o.schedule = load_schedule(*schedule, *l, h))) return 1;
    o.json = *format == "json";
    std::string a = *arch;
    std::string num = a.substr(a.find_first_of("0123456789"));
    o.arch = {"-gencode=arch=compute_" + num + ",code=" + a};
    if (*candidates > 0) return bench_candidates(*l->program, *l->diagram, l->sizes, h, o, static_cast<std::size_t>(*candidates));
    return run_bench(*l->program, *l->diagram, l->sizes, h, o);
  };
}

}  // namespace napkin::cli
