// The flash score maps read the arrays that are not staged in tiles (masks, biases) against their
// extents wherever a row or key index may lie past the end, and unbounded only in interior chunks
// (issue 12: `mask(S, M)` with a bf16 M at q = x = 260 read past M's end on the H100). Checked on
// the emitted text of the GPU sweep's mask and bias diagrams (tests/gpu/), which also compile with
// nvcc for sm_80 and sm_90a where nvcc is found. The device runs are tests/gpu/sweep.sh.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "emit/cuda_emitter.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

struct LoadCount {
  int bounded = 0, unbounded_edge = 0, interior = 0;
};

/** Counts the loads of `array` in `cu` line by line: in an interior block (the block of an
 *  `if (interior ...)` or `if (x_left == T_X ...)` line), at the edge bounded by `i_a < N_a ? ...`, or
 *  at the edge unbounded. */
LoadCount count_loads(const std::string& cu, const std::string& array) {
  LoadCount n;
  const std::regex load("napkin::to_f\\(a\\." + array + "\\[");
  const std::regex bounded("< N_\\w+ \\? napkin::to_f\\(a\\." + array + "\\[");
  std::istringstream in(cu);
  std::string line;
  int depth = 0, interior_depth = -1;  // brace depth; the depth outside the interior block, -1: not in one
  while (std::getline(in, line)) {
    const bool opens_interior = line.find("if (interior") != std::string::npos || line.find("if (x_left == T_X") != std::string::npos;
    const auto loads = std::distance(std::sregex_iterator(line.begin(), line.end(), load), std::sregex_iterator());
    const auto bound = std::distance(std::sregex_iterator(line.begin(), line.end(), bounded), std::sregex_iterator());
    if (interior_depth >= 0) n.interior += static_cast<int>(loads);
    else n.bounded += static_cast<int>(bound), n.unbounded_edge += static_cast<int>(loads - bound);
    if (opens_interior && interior_depth < 0) interior_depth = depth;
    for (char ch : line) {
      if (ch == '{') ++depth;
      if (ch == '}' && --depth == interior_depth) interior_depth = -1;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("flash score maps read mask and bias arrays against their extents outside interior chunks", "[emit][cuda]") {
  Hardware hw = load_hardware("h100");
  struct Case {
    const char* file;
    const char* array;
    SizeMap sizes;
  };
  const std::vector<Case> cases = {
      {"attention_mask_bf16.napkin", "M", {}},
      {"attention_mask_bf16.napkin", "M", {{"q", 130}, {"x", 777}, {"d", 64}}},
      {"attention_mask_bf16.napkin", "M", {{"d", 96}}},  // mma.sync only (no wgmma for d = 96)
      {"attention_mask_fp32.napkin", "M", {}},
      {"attention_bias.napkin", "B", {}},
      {"causal_attention_mask.napkin", "M", {}},
  };
  const bool nvcc = !std::string(NAPKIN_NVCC).empty();
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-bounds-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  int compiled = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(c.file << " case " << i);
    LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/gpu/" + c.file);
    SizeMap sizes = l.sizes;
    for (const auto& [k, v] : c.sizes) sizes[k] = v;
    Derivation dv = derive(*l.program, *l.diagram, sizes, hw);
    const std::string cu = emit_cuda(*l.program, *l.diagram, dv, hw);
    REQUIRE(cu.find("// strategy flash") != std::string::npos);
    const LoadCount n = count_loads(cu, c.array);
    CHECK(n.unbounded_edge == 0);  // the rule: no load past a tile's edge without its bound
    CHECK(n.bounded > 0);          // the edge path exists and reads the array
    CHECK(n.interior > 0);         // interior chunks keep their unpredicated loads
    if (!nvcc) continue;
    const std::string path = dir + "/k" + std::to_string(i) + ".cu";
    std::ofstream(path) << cu;
    for (const std::string arch : {"80", "90a"}) {
      const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -ptx -arch=compute_" + arch + " -o " + path + ".ptx " + path + " > " + path + ".log 2>&1";
      INFO(cmd << "\n" << slurp(path + ".log"));
      CHECK(std::system(cmd.c_str()) == 0);
      CHECK(slurp(path + ".log").find("warning") == std::string::npos);
      ++compiled;
    }
  }
  CHECK((nvcc ? compiled == 2 * static_cast<int>(cases.size()) : compiled == 0));
  std::filesystem::remove_all(dir);
}
