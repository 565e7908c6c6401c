// napkin compare: the best schedule for each (hardware, dtype) pair: predicted time, TFLOP/s,
// bound and bytes per level, as a table, a CSV file and an SVG bar chart (cli/compare_report.hpp);
// with --measure, also measured on this machine's GPU where the row's hardware is that GPU
// (cli/compare_measure.hpp).
#include <fmt/core.h>

#include <sstream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/compare_measure.hpp"
#include "cli/compare_report.hpp"
#include "kernels/process.hpp"
#include "derive/derivation.hpp"
#include "diagrams/npy.hpp"

namespace napkin::cli {

namespace {

/** The names of a comma-separated option value; raises UserError when it names none. */
std::vector<std::string> split(const std::string& s, const std::string& option) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  if (out.empty()) throw UserError(option + " needs at least one name (a comma-separated list), got '" + s + "'");
  return out;
}

/** The row of (h, dt): the derived schedule's prediction, or the reason there is none in `note`. */
CompareRow predict(const Loaded& l, const Hardware& h, const std::string& dname, DType dt) {
  CompareRow r;
  r.hw = h.name, r.dtype = dname;
  if (!h.tensor_rate(dt) && dt != DType::fp32) {
    r.note = "no " + dname + " tensor cores on " + h.name;
    return r;
  }
  ModelOptions opt;
  opt.dtype = dt;
  try {
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, h, opt);
    r.ok = true;
    r.kernels = dv.chosen.kernels.size();
    r.seconds = dv.chosen.cost.t_total;
    r.flops = dv.chosen.cost.flops;
    r.hbm = dv.chosen.cost.hbm_bytes;
    r.l2 = dv.chosen.cost.l2_to_smem_bytes;
    const KernelChoice* slowest = &dv.chosen.kernels.front();
    for (const auto& k : dv.chosen.kernels)
      if (k.cost.t_total > slowest->cost.t_total) slowest = &k;
    r.bound = slowest->cost.bound;
  } catch (const UserError& e) {
    r.note = e.what();
  }
  return r;
}

/** Raises UserError when `nvcc` cannot be run (--measure builds every measured row with it). */
void require_nvcc(const std::string& nvcc) {
  const ChildStatus st = run_child({nvcc, "--version"}, "/dev/null", "/dev/null");
  if (!st.ok()) throw UserError("--measure builds the kernels with nvcc, but '" + nvcc + " --version' failed (" + st.describe() + "); use --nvcc PATH");
}

}  // namespace

Runner setup_compare(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto hws = std::make_shared<std::string>("a100,h100,h200,b200");
  auto dtypes = std::make_shared<std::string>("bf16,fp8e4m3");
  auto out = std::make_shared<std::string>();
  auto measure = std::make_shared<bool>(false);
  auto bench = std::make_shared<BenchOptions>();
  args->add_to(sub);
  sub.add_option("--hw", *hws, "Comma-separated hardware names")->capture_default_str();
  sub.add_option("--dtype", *dtypes, "Comma-separated dtypes arrays are stored in (8 bits or fewer: inputs in it, outputs and intermediates in bf16)")->capture_default_str();
  sub.add_option("-o,--output", *out, "Prefix of the CSV and SVG files (default: <diagram>-compare)");
  auto* m = sub.add_flag("--measure", *measure,
                         "Also build, check and time each row whose hardware is this machine's GPU (napkin bench's machinery; needs a GPU and nvcc)");
  sub.add_option("--runs", bench->runs, "--measure: timed runs per measurement (median; at least 20)")
      ->capture_default_str()->check(CLI::Range(20, 100000))->needs(m);
  sub.add_option("--workdir", bench->workdir, "--measure: folder of the rows' work folders (default: napkin-compare-<diagram>)")->needs(m);
  sub.add_option("--nvcc", bench->nvcc, "--measure: CUDA compiler")->capture_default_str()->needs(m);
  return [=] {
    auto l = load_checked(*args);
    if (!l) return 1;
    const Diagram& d = *l->diagram;
    const auto hw_names = split(*hws, "--hw"), dtype_names = split(*dtypes, "--dtype");
    std::vector<DType> dts;
    for (const auto& dname : dtype_names) {
      auto dt = parse_dtype(dname);
      if (!dt) throw UserError("unknown dtype '" + dname + "'; expected one of " + dtype_list());
      dts.push_back(*dt);
    }
    std::vector<Hardware> hardware;
    for (const auto& hname : hw_names) hardware.push_back(load_hardware(hname));
    std::optional<GpuInfo> gpu;  // --measure: the GPU and nvcc are there, or nothing is written
    if (*measure) {
      gpu = probe_gpu();
      require_nvcc(bench->nvcc);
      fmt::print(stderr, "napkin compare --measure: GPU {}\n", describe_gpu(*gpu));
    }
    const std::string workdir = bench->workdir.empty() ? "napkin-compare-" + d.name : bench->workdir;
    std::vector<CompareRow> rows;
    bool all_correct = true;
    for (std::size_t hi = 0; hi < hardware.size(); ++hi)
      for (std::size_t di = 0; di < dts.size(); ++di) {
        CompareRow r = predict(*l, hardware[hi], dtype_names[di], dts[di]);
        if (gpu) {
          fmt::print(stderr, "napkin compare --measure: {} {} ...\n", r.hw, r.dtype);
          measure_row(r, *l->program, d, l->sizes, hardware[hi], dts[di], *gpu, *bench, workdir + "/" + hw_names[hi] + "-" + dtype_names[di]);
          all_correct &= r.measure != Measured::wrong && r.measure != Measured::failed;
        }
        rows.push_back(r);
      }
    fmt::print("{}", compare_table(rows, d.name));
    std::string prefix = out->empty() ? d.name + "-compare" : *out;
    OutputSet files;  // the CSV and the chart: both or neither
    files.add(prefix + ".csv", compare_csv(rows));
    files.add(prefix + ".svg", compare_chart(rows, "napkin compare: " + d.name));
    files.commit();
    fmt::print("\nwrote {}.csv and {}.svg\n", prefix, prefix);
    if (!all_correct) fmt::print("a measured row was WRONG or failed: exit status 1\n");
    return all_correct ? 0 : 1;
  };
}

}  // namespace napkin::cli
