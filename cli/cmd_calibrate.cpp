// napkin calibrate: measure the model's ceilings on this machine's GPU (or take measurements made
// elsewhere) and write a hardware description with them.
#include <fmt/core.h>

#include <filesystem>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "diagrams/npy.hpp"
#include "kernels/calibrate.hpp"

namespace napkin::cli {

Runner setup_calibrate(CLI::App& sub) {
  auto hw = std::make_shared<std::string>();
  auto measurements = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  sub.add_option("--hw", *hw, "The bundled description to start from (its datasheet peaks and limits)")->required();
  sub.add_option("--measurements", *measurements,
                 "Use this output of kernels/calibrate/microbench.cu (run on a GPU machine) instead of running it here");
  sub.add_option("-o,--output", *out, "The description to write (default: <hw>-measured.toml)");
  return [=] {
    Hardware base = load_hardware(*hw);
    std::string text = measurements->empty() ? run_microbenchmarks(base) : read_file(*measurements);
    auto m = parse_measurements(text);
    Hardware h = apply_measurements(base, m);
    std::string device = m.count("device") ? m.at("device") : "unknown device";
    std::string header = "Measured by napkin calibrate on " + device + " (kernels/calibrate/microbench.cu):\n" +
                         "bandwidths, FP32 and SFU rates, launch overhead, SM count and L2 size are measured;\n" +
                         "mma_sync_fraction = measured mma.sync bf16 rate / the datasheet peak of " + base.name + ";\n" +
                         "capacities, limits, tensor-core peaks and MMA shapes are " + base.name + "'s (see hardware/" +
                         std::filesystem::path(base.file).filename().string() + ").";
    std::string path = out->empty() ? (base.aliases.empty() ? base.name : base.aliases.front()) + "-measured.toml" : *out;
    write_file_atomic(path, format_hardware(h, header));
    fmt::print("{}: HBM {:.3g} TB/s, L2 {:.3g} TB/s, SMEM {:.3g} TB/s, mma.sync bf16 {:.0f} TFLOP/s ({:.0f}% of {:.0f}), "
               "exp {:.3g} Tops/s, FP32 {:.3g} TFLOP/s, launch {:.2f} us\nwrote {}\n",
               device, h.hbm.bandwidth_bytes_per_s / 1e12, h.l2.bandwidth_bytes_per_s / 1e12, h.smem.bandwidth_bytes_per_s / 1e12,
               h.mma_sync_fraction * base.tensor_rate(DType::bf16).value_or(0) / 1e12, h.mma_sync_fraction * 100,
               base.tensor_rate(DType::bf16).value_or(0) / 1e12, h.sfu_ops_per_s / 1e12, h.fp32_flops_per_s / 1e12,
               h.launch_overhead_s * 1e6, path);
    return 0;
  };
}

}  // namespace napkin::cli
