#include "kernels/calibrate.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace napkin {

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
  fs::path src = fs::path(NAPKIN_SOURCE_DIR) / "kernels" / "calibrate" / "microbench.cu";
  fs::path exe = fs::temp_directory_path() / ("napkin-microbench-" + std::to_string(::getpid()));
  std::string arch = base.arch == "sm_90a" ? "-gencode=arch=compute_90a,code=sm_90a -DNAPKIN_SM90A"
                                          : "-arch=" + base.arch.substr(0, base.arch.find_first_not_of("sm_0123456789"));
  std::string build = "nvcc -O3 -std=c++17 " + arch + " " + src.string() + " -o " + exe.string() + " -lcublas 2>&1";
  auto run = [](const std::string& cmd, int& status) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw UserError("cannot run: " + cmd);
    char buf[4096];
    std::size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return out;
  };
  int status = 0;
  std::string log = run(build, status);
  if (status != 0) throw UserError("building the microbenchmarks failed (is nvcc on PATH?):\n" + log);
  std::string out = run(exe.string() + " 2>&1", status);
  fs::remove(exe);
  if (status != 0) throw UserError("the microbenchmarks failed: " + out);
  return out;
}

}  // namespace napkin
