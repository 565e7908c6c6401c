#include "cli/compare_measure.hpp"

#include <fmt/core.h>

#include <cmath>

#include "derive/derivation.hpp"
#include "emit/cuda_emitter.hpp"
#include "lower/options.hpp"

namespace napkin::cli {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

Diagram retyped(const Diagram& d, DType dt) {
  ModelOptions opt;
  opt.dtype = dt;
  return stored_as(d, opt);
}

}  // namespace

std::optional<std::string> why_not_measured(const CompareRow& r, const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, DType dt,
                                            const GpuInfo& gpu) {
  if (!r.ok) return r.note;
  if (auto why = gpu_mismatch(hw, gpu)) return why;
  // What the emitter and the harness cannot store is a reason, asked before anything is built.
  try {
    const Diagram typed = retyped(d, dt);
    const Derivation dv = derive(p, typed, sizes, hw);
    const Diagram& derived = dv.diagram(typed);
    emit_cuda(p, derived, dv, hw);
    bench_spec(p, derived, sizes);
  } catch (const UserError& e) {
    return first_line(e.what());
  }
  return std::nullopt;
}

void measure_row(CompareRow& r, const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, DType dt, const GpuInfo& gpu,
                 const BenchOptions& base, const std::string& workdir) {
  if (auto why = why_not_measured(r, p, d, sizes, hw, dt, gpu)) {
    r.measure = Measured::not_measured, r.measure_note = *why;
    return;
  }
  BenchOptions o = base;
  o.workdir = workdir;
  o.arch = {gencode_for(hw.arch)};
  o.rel_tolerance = check_tolerance(dt);
  o.json = false;
  o.schedule.reset();
  try {
    const BenchResult b = measure_bench(p, retyped(d, dt), sizes, hw, o);
    r.measure = b.pass ? Measured::measured : Measured::wrong;
    r.measured_s = b.seconds, r.max_rel_err = b.max_rel_err, r.tolerance = o.rel_tolerance;
    if (std::fabs(b.predicted_s - r.seconds) > 1e-6 * r.seconds)  // the retyped diagram should be priced as the row (stored_as)
      fmt::print(stderr, "napkin compare: warning: {} {}: the measured schedule is predicted at {:.1f} us, the row at {:.1f} us\n", r.hw, r.dtype,
                 b.predicted_s * 1e6, r.seconds * 1e6);
  } catch (const UserError& e) {
    r.measure = Measured::failed, r.measure_note = first_line(e.what());
    fmt::print(stderr, "napkin compare: {} {}: {}\n", r.hw, r.dtype, e.what());
  }
}

std::string gencode_for(const std::string& arch) {
  const std::size_t digits = arch.find_first_of("0123456789");
  const std::string num = digits == std::string::npos ? arch : arch.substr(digits);
  return "-gencode=arch=compute_" + num + ",code=" + arch;
}

}  // namespace napkin::cli
