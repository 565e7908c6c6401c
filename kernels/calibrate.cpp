#include "kernels/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "kernels/process.hpp"

namespace napkin {

namespace {
/** The bytes of `path`; empty when it cannot be read. */
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

std::map<std::string, std::string> parse_measurements(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto sp = line.find(' ');
    if (sp == std::string::npos) throw UserError("measurements: malformed line '" + line + "' (expected 'key value')");
    out[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return out;
}

Hardware apply_measurements(const Hardware& base, const std::map<std::string, std::string>& m) {
  auto get = [&](const char* key) {
    auto it = m.find(key);
    if (it == m.end()) throw UserError(std::string("measurements: missing '") + key + "'");
    try {
      return std::stod(it->second);
    } catch (const std::exception&) {
      throw UserError(std::string("measurements: '") + key + "' is not a number: " + it->second);
    }
  };
  Hardware h = base;
  h.sm_count = static_cast<int>(get("sm_count"));
  h.l2.capacity_bytes = get("l2_capacity_bytes");
  h.hbm.bandwidth_bytes_per_s = get("hbm_bandwidth_bytes_per_s");
  h.l2.bandwidth_bytes_per_s = get("l2_bandwidth_bytes_per_s");
  h.smem.bandwidth_bytes_per_s = get("smem_bandwidth_bytes_per_s");
  h.fp32_flops_per_s = get("fp32_flops_per_s");
  h.sfu_ops_per_s = get("sfu_ops_per_s");
  h.launch_overhead_s = get("launch_overhead_s");
  double peak = base.tensor_rate(DType::bf16).value_or(0);
  if (peak > 0) h.mma_sync_fraction = std::min(1.0, get("mma_sync_bf16_flops_per_s") / peak);
  // Measured only where the GPU has them (wgmma, the bulk-copy engine) or by newer microbenchmarks.
  if (peak > 0 && m.count("wgmma_bf16_flops_per_s")) h.wgmma_fraction = std::min(1.0, get("wgmma_bf16_flops_per_s") / peak);
  if (m.count("l2_bulk_bandwidth_bytes_per_s")) h.l2_bulk_bandwidth_bytes_per_s = get("l2_bulk_bandwidth_bytes_per_s");
  if (m.count("l2_atomic_bandwidth_bytes_per_s")) h.l2_atomic_bandwidth_bytes_per_s = get("l2_atomic_bandwidth_bytes_per_s");
  if (m.count("hbm_latency_s")) h.hbm_latency_s = get("hbm_latency_s");
  if (peak > 0 && m.count("sustained_bf16_gemm_flops_per_s"))
    h.sustained_tensor_fraction = std::min(1.0, get("sustained_bf16_gemm_flops_per_s") / peak);
  h.name = base.name + "-measured";
  h.aliases.clear();
  for (const auto& a : base.aliases) h.aliases.push_back(a + "-measured");
  return h;
}

std::string run_microbenchmarks(const Hardware& base) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(NAPKIN_SOURCE_DIR) / "kernels" / "calibrate" / "microbench.cu";
  const fs::path exe = fs::temp_directory_path() / ("napkin-microbench-" + std::to_string(::getpid()));
  const fs::path log = exe.string() + ".log";
  std::vector<std::string> build = {"nvcc", "-O3", "-std=c++17"};
  if (base.arch == "sm_90a") build.insert(build.end(), {"-gencode=arch=compute_90a,code=sm_90a", "-DNAPKIN_SM90A"});
  else build.push_back("-arch=" + base.arch.substr(0, base.arch.find_first_not_of("sm_0123456789")));
  build.insert(build.end(), {src.string(), "-o", exe.string(), "-lcublas"});
  auto run = [&](const std::vector<std::string>& argv, const std::string& what) {  // stdout and stderr together
    const ChildStatus st = run_child(argv, log.string(), log.string());
    std::string out = read_text(log.string());
    std::error_code ec;
    fs::remove(log, ec);
    if (!st.ok()) {
      fs::remove(exe, ec);
      throw UserError(what + " failed (" + st.describe() + "): " + shell_quoted(argv) + "\n" + out);
    }
    return out;
  };
  run(build, "building the microbenchmarks (is nvcc on PATH?)");
  std::string out = run({exe.string()}, "the microbenchmarks");
  std::error_code ec;
  fs::remove(exe, ec);
  return out;
}

}  // namespace napkin
