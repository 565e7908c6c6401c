// The SIMT model's loads (perfmodel/simt_cost.hpp): with threads along the statement's innermost
// axis, a row reduction over an array laid out with that axis innermost reads coalesced (its
// element size per load), the same reduction over an array with another axis innermost reads one
// 32-byte sector per load once the stride is 32 bytes, less below, and an array without the axis
// is a broadcast.
#include <catch2/catch.hpp>

#include "hardware/hardware.hpp"
#include "perfmodel/simt_cost.hpp"
#include "tests/support/run.hpp"

using namespace napkin;

namespace {

double l2_bytes_of(const std::string& text) {
  test::LoadedDiagram l = test::load_text(text);
  const Hardware h200 = load_hardware("h200");
  return price_simt(*l.diagram, {"R"}, l.sizes, h200, ModelOptions{}).l2_bytes;
}

}  // namespace

TEST_CASE("SIMT loads: coalesced along the thread axis, a sector per thread when strided, broadcast without it", "[derive][simt]") {
  const double rows = 64 * 1024, width = 128;  // R[q] over 64k threads, each summing 128 elements
  // A[q,d], d innermost: thread q reads 256 bytes away from thread q + 1: a 32-byte sector per load.
  const double strided = l2_bytes_of("diagram s\naxis q = 65536\naxis d = 128\nin A[q,d] : bf16\nR[q] = sum(A; d)\nout R : bf16\n");
  // A[d,q], q innermost: consecutive threads read consecutive elements: 2 bytes per load.
  const double coalesced = l2_bytes_of("diagram c\naxis q = 65536\naxis d = 128\nin A[d,q] : bf16\nR[q] = sum(A; d)\nout R : bf16\n");
  // A[q,e] with e = 4: 8 bytes apart, a quarter sector per thread.
  const double narrow = l2_bytes_of("diagram n\naxis q = 65536\naxis e = 4\nin A[q,e] : bf16\nR[q] = sum(A; e)\nout R : bf16\n");
  // W[d] lacks q: one address for the warp.
  const double broadcast = l2_bytes_of("diagram b\naxis q = 65536\naxis d = 128\nin A[d,q] : bf16\nin W[d] : bf16\n"
                                       "R[q] = sum(A * W; d)\nout R : bf16\n") - coalesced;
  CHECK(strided == Approx(rows * width * 32));
  CHECK(coalesced == Approx(rows * width * 2));
  CHECK(narrow == Approx(rows * 4 * 8));
  CHECK(broadcast == Approx(rows * width * 2 / 32.0));
}
