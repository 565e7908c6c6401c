#include "hardware/hardware_schema.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace napkin::hwschema {

namespace {

// Ranges: wide enough for any GPU to come, narrow enough that every time the model forms stays
// finite and positive and every integer fits an int. Rates and bandwidths from 1e6 to 1e18 per
// second; clocks from 1 MHz to 100 GHz; shares of a peak from 0.001 to 1; times up to a second;
// byte counts up to 2^50 (1 PiB) per device and 2^30 per SM.
constexpr double kMinRate = 1e6;
constexpr double kRate = 1e18;
constexpr double kMinShare = 1e-3;
constexpr double kDeviceBytes = 1125899906842624.0;  // 2^50
constexpr double kSmBytes = 1073741824.0;            // 2^30

using H = Hardware;
using V = Value;

constexpr Field<H> kTop[] = {
    {"name", Type::string, true, 0, 0, false, "", [](H& h, const V& v) { h.name = v.text; }},
    {"aliases", Type::string_list, false, 0, 0, false, "", [](H& h, const V& v) { h.aliases = v.list; }},
    {"arch", Type::string, true, 0, 0, false, "", [](H& h, const V& v) { h.arch = v.text; }},
    {"sm_count", Type::integer, true, 1, 65536, false, "count", [](H& h, const V& v) { h.sm_count = static_cast<int>(v.number); }},
    {"clock_hz", Type::real, true, 1e6, 1e11, false, "Hz", [](H& h, const V& v) { h.clock_hz = v.number; }},
    {"launch_overhead_s", Type::real, true, 0, 1, false, "s", [](H& h, const V& v) { h.launch_overhead_s = v.number; }},
};
constexpr Field<H> kHbm[] = {
    {"capacity_bytes", Type::integer, true, 1, kDeviceBytes, false, "bytes", [](H& h, const V& v) { h.hbm.capacity_bytes = v.number; }},
    {"bandwidth_bytes_per_s", Type::real, true, kMinRate, kRate, false, "bytes/s", [](H& h, const V& v) { h.hbm.bandwidth_bytes_per_s = v.number; }},
    {"latency_s", Type::real, false, 0, 1, true, "s", [](H& h, const V& v) { h.hbm_latency_s = v.number; }},
    {"loaded_latency_s", Type::real, false, 0, 1, true, "s", [](H& h, const V& v) { h.hbm_loaded_latency_s = v.number; }},
    {"rows_fraction", Type::real, false, kMinShare, 1, false, "fraction of the HBM bandwidth", [](H& h, const V& v) { h.rows_hbm_fraction = v.number; }},
};
constexpr Field<H> kL2[] = {
    {"capacity_bytes", Type::integer, true, 1, kDeviceBytes, false, "bytes", [](H& h, const V& v) { h.l2.capacity_bytes = v.number; }},
    {"bandwidth_bytes_per_s", Type::real, true, kMinRate, kRate, false, "bytes/s", [](H& h, const V& v) { h.l2.bandwidth_bytes_per_s = v.number; }},
    {"bulk_bandwidth_bytes_per_s", Type::real, false, kMinRate, kRate, false, "bytes/s",
     [](H& h, const V& v) { h.l2_bulk_bandwidth_bytes_per_s = v.number; }},
    {"bulk_sm_bandwidth_bytes_per_s", Type::real, false, kMinRate / 1000, kRate, false, "bytes/s",
     [](H& h, const V& v) { h.l2_bulk_sm_bandwidth_bytes_per_s = v.number; }},
    {"loaded_latency_s", Type::real, false, 0, 1, true, "s", [](H& h, const V& v) { h.l2_loaded_latency_s = v.number; }},
    {"atomic_bandwidth_bytes_per_s", Type::real, false, kMinRate, kRate, false, "bytes/s",
     [](H& h, const V& v) { h.l2_atomic_bandwidth_bytes_per_s = v.number; }},
    {"reread_capacity_bytes", Type::integer, false, 1, kDeviceBytes, false, "bytes", [](H& h, const V& v) { h.l2_reread_capacity_bytes = v.number; }},
};
constexpr Field<H> kSmem[] = {
    {"capacity_per_sm_bytes", Type::integer, true, 1, kSmBytes, false, "bytes", [](H& h, const V& v) { h.smem.capacity_bytes = v.number; }},
    {"max_per_block_bytes", Type::integer, true, 1, kSmBytes, false, "bytes", [](H& h, const V& v) { h.smem_max_per_block_bytes = v.number; }},
    {"bandwidth_bytes_per_s", Type::real, true, kMinRate, kRate, false, "bytes/s", [](H& h, const V& v) { h.smem.bandwidth_bytes_per_s = v.number; }},
};
constexpr Field<H> kRegisters[] = {
    {"per_sm", Type::integer, true, 1, 16777216, false, "32-bit registers", [](H& h, const V& v) { h.registers_per_sm = static_cast<int>(v.number); }},
    {"max_per_thread", Type::integer, true, 1, 65536, false, "32-bit registers",
     [](H& h, const V& v) { h.max_registers_per_thread = static_cast<int>(v.number); }},
};
constexpr Field<H> kLimits[] = {
    {"max_warps_per_sm", Type::integer, true, 1, 65536, false, "count", [](H& h, const V& v) { h.max_warps_per_sm = static_cast<int>(v.number); }},
    {"max_threads_per_block", Type::integer, true, 1, 1048576, false, "count",
     [](H& h, const V& v) { h.max_threads_per_block = static_cast<int>(v.number); }},
    {"max_blocks_per_sm", Type::integer, true, 1, 65536, false, "count", [](H& h, const V& v) { h.max_blocks_per_sm = static_cast<int>(v.number); }},
};
constexpr Field<H> kCompute[] = {
    {"fp32_flops_per_s", Type::real, true, kMinRate, kRate, false, "FLOP/s", [](H& h, const V& v) { h.fp32_flops_per_s = v.number; }},
    {"sfu_ops_per_s", Type::real, true, kMinRate, kRate, false, "ops/s", [](H& h, const V& v) { h.sfu_ops_per_s = v.number; }},
    {"mma_sync_fraction", Type::real, true, kMinShare, 1, false, "fraction of the tensor-core peak", [](H& h, const V& v) { h.mma_sync_fraction = v.number; }},
    {"wgmma_fraction", Type::real, false, kMinShare, 1, false, "fraction of the tensor-core peak", [](H& h, const V& v) { h.wgmma_fraction = v.number; }},
    {"sustained_tensor_fraction", Type::real, false, kMinShare, 1, false, "fraction of the tensor-core peak",
     [](H& h, const V& v) { h.sustained_tensor_fraction = v.number; }},
    {"flash_bwd_smem_exposed", Type::real, false, 0, 1, false, "share of a flash_bwd kernel's SMEM time",
     [](H& h, const V& v) { h.flash_bwd_smem_exposed = v.number; }},
    {"flash_softmax_hidden", Type::real, false, 0, 1, false, "share of a flash forward kernel's shorter compute term",
     [](H& h, const V& v) { h.flash_softmax_hidden = v.number; }},
    {"flash_chunk_latency_s", Type::real, false, 0, 1e-3, false, "s", [](H& h, const V& v) { h.flash_chunk_latency_s = v.number; }},
    {"flash_mma_sync_factor", Type::real, false, 1, 10, false, "times a flash forward kernel's summed compute terms on mma.sync",
     [](H& h, const V& v) { h.flash_mma_sync_factor = v.number; }},
    {"flash_mma_sync_alone", Type::real, false, 0.1, 1, false, "share of that time for a block alone on its SM",
     [](H& h, const V& v) { h.flash_mma_sync_alone = v.number; }},
    {"cluster_stage_latency_s", Type::real, false, 0, 1e-3, false, "s", [](H& h, const V& v) { h.cluster_stage_latency_s = v.number; }},
    {"staged_store_block_s", Type::real, false, 0, 1e-3, false, "s", [](H& h, const V& v) { h.staged_store_block_s = v.number; }},
    {"gemm_last_store_block_s", Type::real, false, 0, 1e-3, false, "s", [](H& h, const V& v) { h.gemm_last_store_block_s = v.number; }},
    {"gemm_tile_turnover_s", Type::real, false, 0, 1e-3, false, "s", [](H& h, const V& v) { h.gemm_tile_turnover_s = v.number; }},
    {"sustained_smem_fraction", Type::real, false, kMinShare, 1, false, "fraction of the SMEM bandwidth",
     [](H& h, const V& v) { h.sustained_smem_fraction = v.number; }},
};
constexpr Field<H> kTensorCore[] = {
    {"<dtype>", Type::real, false, kMinRate, kRate, false, "FLOP/s", [](H& h, const V& v) { h.tensor_flops_per_s[*parse_dtype(v.key)] = v.number; }},
};
constexpr Field<H> kFeatures[] = {
    {"cp_async", Type::boolean, true, 0, 0, false, "", [](H& h, const V& v) { h.cp_async = v.flag; }},
    {"tma", Type::boolean, true, 0, 0, false, "", [](H& h, const V& v) { h.tma = v.flag; }},
    {"wgmma", Type::boolean, true, 0, 0, false, "", [](H& h, const V& v) { h.wgmma = v.flag; }},
    {"clusters", Type::boolean, false, 0, 0, false, "", [](H& h, const V& v) { h.clusters = v.flag; }},
};
// [[mma]]: the dtype must name a dtype and the scope be "warp" or "warpgroup"; the reader checks
// both beside the types (hardware.cpp, check_mma).
constexpr Field<MmaShape> kMma[] = {
    {"dtype", Type::string, true, 0, 0, false, "", [](MmaShape& m, const V& v) { m.dtype = parse_dtype(v.text).value_or(DType::bf16); }},
    {"shape", Type::integer_triple, true, 1, 1024, false, "elements (m, n, k)",
     [](MmaShape& m, const V& v) {
       m.m = static_cast<int>(v.triple[0]);
       m.n = static_cast<int>(v.triple[1]);
       m.k = static_cast<int>(v.triple[2]);
     }},
    {"scope", Type::string, true, 0, 0, false, "", [](MmaShape& m, const V& v) { m.scope = v.text; }},
    {"ptx", Type::string, true, 0, 0, false, "", [](MmaShape& m, const V& v) { m.ptx = v.text; }},
    {"mn_major", Type::boolean, false, 0, 0, false, "", [](MmaShape& m, const V& v) { m.mn_major = v.flag; }},
    {"fraction", Type::real, false, kMinShare, 1, false, "share of the dtype's peak", [](MmaShape& m, const V& v) { m.fraction = v.number; }},
};

constexpr Section kSections[] = {
    {"", Section::Kind::fixed, true, kTop, {}},
    {"hbm", Section::Kind::fixed, true, kHbm, {}},
    {"l2", Section::Kind::fixed, true, kL2, {}},
    {"smem", Section::Kind::fixed, true, kSmem, {}},
    {"registers", Section::Kind::fixed, true, kRegisters, {}},
    {"limits", Section::Kind::fixed, true, kLimits, {}},
    {"compute", Section::Kind::fixed, true, kCompute, {}},
    {"tensor_core", Section::Kind::dtype_keyed, true, kTensorCore, {}},
    {"features", Section::Kind::fixed, true, kFeatures, {}},
    {"mma", Section::Kind::table_array, false, {}, kMma},
};

std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const Section> sections() { return kSections; }

template <class Target>
std::string expectation(const Field<Target>& f) {
  std::string unit = f.unit.empty() ? "" : " (" + std::string(f.unit) + ")";
  switch (f.type) {
    case Type::string: return "a string";
    case Type::string_list: return "a list of strings";
    case Type::boolean: return "true or false";
    case Type::integer: return "an integer from " + number_text(f.lo) + " to " + number_text(f.hi) + unit;
    case Type::integer_triple:
      return "a list of 3 integers, each from " + number_text(f.lo) + " to " + number_text(f.hi) + unit;
    case Type::real:
      return std::string("a number in ") + (f.lo_open ? "(" : "[") + number_text(f.lo) + ", " + number_text(f.hi) + "]" + unit;
  }
  return "";
}
template std::string expectation(const Field<Hardware>&);
template std::string expectation(const Field<MmaShape>&);

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

}  // namespace napkin::hwschema
