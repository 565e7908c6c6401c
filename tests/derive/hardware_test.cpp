// Hardware descriptions: every bundled file loads with sane values; bad files give located errors.
#include <catch2/catch.hpp>

#include "perfmodel/hardware.hpp"

using namespace napkin;

TEST_CASE("every bundled hardware description loads, by name and alias", "[hardware]") {
  REQUIRE(bundled_hardware().size() == 5);
  for (const char* name : {"a100", "H100-SXM5", "h100", "h200", "b200", "rtx4090", "A100-SXM4-80GB"}) {
    INFO(name);
    Hardware h = load_hardware(name);
    CHECK(h.sm_count > 0);
    CHECK(h.hbm.bandwidth_bytes_per_s > 1e11);
    CHECK(h.smem_max_per_block_bytes <= h.smem.capacity_bytes);
    CHECK(h.tensor_rate(DType::bf16).value_or(0) > h.fp32_flops_per_s);
    REQUIRE(h.warp_mma(DType::bf16));
    CHECK(h.warp_mma(DType::bf16)->ptx.find("m16n8k16") != std::string::npos);
  }
  CHECK(load_hardware("h200").hbm.bandwidth_bytes_per_s > load_hardware("h100").hbm.bandwidth_bytes_per_s);
  CHECK_FALSE(load_hardware("a100").tensor_rate(DType::fp8e4m3));
  CHECK_THROWS_AS(load_hardware("tpu-v9"), UserError);
}

TEST_CASE("malformed or incomplete descriptions are located errors", "[hardware][errors]") {
  auto errors = [](const std::string& text) {
    SourceManager sm;
    DiagnosticEngine diags;
    auto h = parse_hardware(*sm.add("bad.toml", text), diags);
    CHECK_FALSE(h);
    return diags.render();
  };
  CHECK(errors("name = \"x\"\nsm_count = = 3\n").find("bad.toml:2:") != std::string::npos);
  std::string missing = errors("name = \"x\"\narch = \"sm_80\"\nsm_count = 10\n");
  CHECK(missing.find("missing table [hbm]") != std::string::npos);
  std::string negative = errors(
      "name = \"x\"\narch = \"a\"\nsm_count = -4\nclock_hz = 1e9\nlaunch_overhead_s = 0\n"
      "[hbm]\ncapacity_bytes = 1\nbandwidth_bytes_per_s = 1\n[l2]\ncapacity_bytes = 1\nbandwidth_bytes_per_s = 1\n"
      "[smem]\ncapacity_per_sm_bytes = 1\nmax_per_block_bytes = 1\nbandwidth_bytes_per_s = 1\n"
      "[registers]\nper_sm = 1\nmax_per_thread = 1\n[limits]\nmax_warps_per_sm = 1\nmax_threads_per_block = 1\nmax_blocks_per_sm = 1\n"
      "[compute]\nfp32_flops_per_s = 1\nsfu_ops_per_s = 1\nmma_sync_fraction = 1\n[tensor_core]\nbf17 = 3\n"
      "[features]\ncp_async = true\ntma = false\nwgmma = \"no\"\n");
  CHECK(negative.find("bad.toml:3:12: error: 'sm_count' must be positive") != std::string::npos);
  CHECK(negative.find("unknown dtype 'bf17'") != std::string::npos);
  CHECK(negative.find("'features.wgmma' must be true or false") != std::string::npos);
}
