// Hardware descriptions: every bundled file loads with sane values; bad files give located errors.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/calibrate.hpp"
#include "hardware/hardware.hpp"
#include "tests/support/run.hpp"

using napkin::test::slurp;

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
  CHECK(negative.find("bad.toml:3:12: error: 'sm_count' must be an integer from 1 to 65536 (count); got -4") != std::string::npos);
  CHECK(negative.find("unknown dtype 'bf17' in [tensor_core]; did you mean 'bf16'?") != std::string::npos);
  CHECK(negative.find("'features.wgmma' must be true or false; got a string") != std::string::npos);
}

TEST_CASE("format_hardware round-trips with parse_hardware for every bundled description", "[hardware]") {
  for (const auto& file : bundled_hardware()) {
    INFO(file);
    Hardware h = load_hardware(file);
    // No bundled description has the atomic-add bandwidth yet: give it one so a field that is not
    // printed or not parsed reads back as 0 and fails below.
    if (h.l2_atomic_bandwidth_bytes_per_s == 0) h.l2_atomic_bandwidth_bytes_per_s = 2.345e12;
    if (h.l2_reread_capacity_bytes == 0) h.l2_reread_capacity_bytes = 12345678;  // likewise: only the Hopper descriptions give it
    SourceManager sm;
    DiagnosticEngine diags;
    auto back = parse_hardware(*sm.add("round.toml", format_hardware(h, "a header\nof two lines")), diags);
    INFO(diags.render());
    REQUIRE(back);
    CHECK(back->name == h.name);
    CHECK(back->aliases == h.aliases);
    CHECK(back->sm_count == h.sm_count);
    CHECK(back->hbm.bandwidth_bytes_per_s == Approx(h.hbm.bandwidth_bytes_per_s).epsilon(1e-5));
    CHECK(back->smem_max_per_block_bytes == h.smem_max_per_block_bytes);
    CHECK(back->tensor_flops_per_s.size() == h.tensor_flops_per_s.size());
    CHECK(back->mma.size() == h.mma.size());
    CHECK(back->mma.front().ptx == h.mma.front().ptx);
    CHECK(back->wgmma == h.wgmma);
    CHECK(back->wgmma_fraction == Approx(h.wgmma_fraction).epsilon(1e-5));
    CHECK(back->l2_bulk_bandwidth_bytes_per_s == Approx(h.l2_bulk_bandwidth_bytes_per_s).epsilon(1e-5));
    CHECK(back->l2_atomic_bandwidth_bytes_per_s > 0);
    CHECK(back->l2_atomic_bandwidth_bytes_per_s == Approx(h.l2_atomic_bandwidth_bytes_per_s).epsilon(1e-5));
    CHECK(back->l2_reread_capacity_bytes == h.l2_reread_capacity_bytes);
    CHECK(back->hbm_latency_s == Approx(h.hbm_latency_s).epsilon(1e-5));
    CHECK(back->clusters == h.clusters);
    CHECK(back->sustained_tensor_fraction == Approx(h.sustained_tensor_fraction).epsilon(1e-5));
  }
}

TEST_CASE("the H100 description carries the measured wgmma rate, bulk-copy bandwidth and HBM latency", "[hardware]") {
  Hardware h = load_hardware("h100");
  CHECK(h.wgmma_fraction > h.mma_sync_fraction);
  CHECK(h.wgmma_fraction <= 1);
  CHECK(h.l2_bulk_bandwidth_bytes_per_s > h.l2.bandwidth_bytes_per_s);
  CHECK(h.hbm_latency_s > 1e-7);
  CHECK(h.hbm_latency_s < 2e-6);
  Hardware a = load_hardware("a100");  // no wgmma: the figure stays unknown
  CHECK(a.wgmma_fraction == 0);
  SourceManager sm;
  DiagnosticEngine diags;
  std::string text = slurp(std::string(NAPKIN_SOURCE_DIR) + "/hardware/h100.toml");
  const std::string key = "wgmma_fraction = 0.986";
  REQUIRE(text.find(key) != std::string::npos);
  text.replace(text.find(key), key.size(), "wgmma_fraction = 1.5");
  CHECK_FALSE(parse_hardware(*sm.add("h.toml", text), diags));
  CHECK(diags.render().find("'compute.wgmma_fraction' must be a number in [0.001, 1]") != std::string::npos);
}

TEST_CASE("calibration merges measured figures into a description", "[hardware][calibrate]") {
  Hardware base = load_hardware("h100");
  std::string text = slurp(std::string(NAPKIN_SOURCE_DIR) + "/hardware/measured/h100-2026-11-21.txt");
  auto m = parse_measurements(text);
  Hardware h = apply_measurements(base, m);
  CHECK(h.name == "H100-SXM5-measured");
  CHECK(h.hbm.bandwidth_bytes_per_s == Approx(std::stod(m.at("hbm_bandwidth_bytes_per_s"))));
  CHECK(h.mma_sync_fraction == Approx(std::stod(m.at("mma_sync_bf16_flops_per_s")) / 989.4e12));
  CHECK(h.mma_sync_fraction < 1);
  CHECK(h.smem_max_per_block_bytes == base.smem_max_per_block_bytes);  // limits stay the datasheet's
  Hardware written = load_hardware(std::string(NAPKIN_SOURCE_DIR) + "/hardware/measured/h100-2026-11-21.toml");
  CHECK(written.l2.bandwidth_bytes_per_s == Approx(h.l2.bandwidth_bytes_per_s).epsilon(1e-5));
  m.erase("sfu_ops_per_s");
  CHECK_THROWS_AS(apply_measurements(base, m), UserError);
  CHECK_THROWS_AS(parse_measurements("just-a-key\n"), UserError);
  // Session 4's measurements add the wgmma rate, the bulk-copy bandwidth and the HBM latency.
  auto m4 = parse_measurements(slurp(std::string(NAPKIN_SOURCE_DIR) + "/hardware/measured/h100-2026-11-21-session4.txt"));
  Hardware h4 = apply_measurements(base, m4);
  CHECK(h4.wgmma_fraction == Approx(std::stod(m4.at("wgmma_bf16_flops_per_s")) / 989.4e12));
  CHECK(h4.l2_bulk_bandwidth_bytes_per_s == Approx(std::stod(m4.at("l2_bulk_bandwidth_bytes_per_s"))));
  CHECK(h4.l2_atomic_bandwidth_bytes_per_s == base.l2_atomic_bandwidth_bytes_per_s);  // session 4 did not measure atomic adds: the base's figure stays
  m4["l2_atomic_bandwidth_bytes_per_s"] = "3.21e+12";  // as microbench.cu's l2_red probe prints it
  CHECK(apply_measurements(base, m4).l2_atomic_bandwidth_bytes_per_s == Approx(3.21e12));
  CHECK(h4.hbm_latency_s == Approx(std::stod(m4.at("hbm_latency_s"))));
  CHECK(h.wgmma_fraction == base.wgmma_fraction);  // the session-2 file has no wgmma line: the base's figure stays
}

TEST_CASE("every description in hardware/ and hardware/measured/ reads without an error", "[hardware]") {
  std::vector<std::string> files = bundled_hardware();
  for (const auto& e : std::filesystem::directory_iterator(std::string(NAPKIN_SOURCE_DIR) + "/hardware/measured"))
    if (e.path().extension() == ".toml") files.push_back(e.path().string());
  REQUIRE(files.size() >= 6);
  for (const auto& f : files) {
    SourceManager sm;
    DiagnosticEngine diags;
    INFO(f);
    CHECK(parse_hardware(*sm.add(f, slurp(f)), diags));
    INFO(diags.render());
    CHECK(diags.diagnostics().empty());
  }
}

TEST_CASE("the schema takes integers only as integers, rejects unknown keys and out-of-range numbers", "[hardware][errors]") {
  const std::string h100 = slurp(std::string(NAPKIN_SOURCE_DIR) + "/hardware/h100.toml");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = h100;
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), to);
    SourceManager sm;
    DiagnosticEngine diags;
    CHECK_FALSE(parse_hardware(*sm.add("h.toml", text), diags));
    return diags.render();
  };
  CHECK(with("sm_count = 132", "sm_count = 0.5").find("h.toml:9:12: error: 'sm_count' must be an integer from 1 to 65536 (count); got 0.5") !=
        std::string::npos);
  CHECK(with("sm_count = 132", "sm_count = 1e30").find("got 1e+30") != std::string::npos);
  CHECK(with("sm_count = 132", "sm_count = 4294967297").find("'sm_count' must be an integer") != std::string::npos);
  CHECK(with("latency_s = 3.24e-7", "latency_sec = 3.24e-7").find("unknown key 'hbm.latency_sec'; did you mean 'hbm.latency_s'?") !=
        std::string::npos);
  CHECK(with("clusters = true", "clusers = true").find("did you mean 'features.clusters'?") != std::string::npos);
  CHECK(with("[limits]", "[limitz]").find("unknown key 'limitz'; did you mean 'limits'?") != std::string::npos);
  CHECK(with("[limits]", "[limitz]").find("missing table [limits]") != std::string::npos);
  CHECK(with("bandwidth_bytes_per_s = 2.97e12", "bandwidth_bytes_per_s = nan").find("'hbm.bandwidth_bytes_per_s' must be a number in") !=
        std::string::npos);
  CHECK(with("max_per_block_bytes = 232448", "max_per_block_bytes = 300000").find("exceeds 'smem.capacity_per_sm_bytes'") != std::string::npos);
  const std::string unrelated = with("sm_count = 132", "sm_count = 132\nsome_unrelated_key = 1");
  CHECK(unrelated.find("unknown key 'some_unrelated_key'") != std::string::npos);
  CHECK(unrelated.find("did you mean") == std::string::npos);
}

TEST_CASE("a broken bundled description reports its own errors, and the unknown-hardware list names each once", "[hardware][errors]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("napkin-hw-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"a100.toml", "h100.toml", "h200.toml"}) fs::copy_file(std::string(NAPKIN_SOURCE_DIR) + "/hardware/" + f, dir / f);
  std::string text = slurp((dir / "h100.toml").string());
  text.replace(text.find("sm_count = 132"), 14, "sm_count = 0.5");
  std::ofstream(dir / "h100.toml") << text;
  ::setenv("NAPKIN_HARDWARE_DIR", dir.c_str(), 1);
  const std::string diagram = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/matmul.napkin";
  auto broken = test::run_napkin("derive " + diagram + " --hw h100");
  auto unknown = test::run_napkin("derive " + diagram + " --hw tpu");
  auto fine = test::run_napkin("derive " + diagram + " --hw a100");
  ::unsetenv("NAPKIN_HARDWARE_DIR");
  fs::remove_all(dir);
  INFO(broken.output << "\n---\n" << unknown.output);
  CHECK(broken.status == 1);
  CHECK(broken.output.find("h100.toml:9:12: error: 'sm_count' must be an integer") != std::string::npos);
  CHECK(broken.output.find("unknown hardware") == std::string::npos);
  CHECK(unknown.status == 1);
  CHECK(unknown.output.find("unknown hardware 'tpu'; bundled: a100, h200 (or give a .toml path)") != std::string::npos);
  CHECK(unknown.output.find("h100.toml' does not load") != std::string::npos);
  CHECK(fine.status == 0);
  // With every file sound, each description appears once, by its first alias.
  try {
    load_hardware("tpu-v9");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("bundled: a100, b200, h100, h200, rtx4090 (") != std::string::npos);
  }
}
