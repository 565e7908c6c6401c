// The SM clock napkin bench reports from the harness's per-round samples (kernels/bench.hpp):
// median, least and largest, and the spread above which the rounds mix clock states.
#include <catch2/catch.hpp>

#include "diagrams/diagnostics.hpp"
#include "kernels/bench.hpp"

using namespace napkin;

TEST_CASE("summarise_clock gives the median, least and largest of the rounds' samples, and their spread", "[kernels][clock]") {
  // The H200's transformer block at s = 2048 (session 46): idle-started rounds near 1980 MHz, then the power limit.
  const ClockSummary c = summarise_clock({1977, 1978, 1900, 1913, 1919, 1918, 1614, 1599, 1600, 1538, 1538, 1523, 1539, 1539, 1539, 1539, 1539,
                                          1569, 1560, 1560});
  CHECK(c.median == 1569);
  CHECK(c.min == 1523);
  CHECK(c.max == 1978);
  CHECK(c.spread() == Approx((1978.0 - 1523.0) / 1978.0));
  CHECK(c.spread() > ClockSummary::kClockDrift);
  const ClockSummary steady = summarise_clock({1980, 1974, 1973, 1980});
  CHECK(steady.median == 1980);  // the upper middle of an even count, as the harness's medians
  CHECK(steady.spread() < ClockSummary::kClockDrift);
}

TEST_CASE("summarise_clock without samples is an internal error", "[kernels][clock]") {
  CHECK_THROWS_AS(summarise_clock({}), InternalError);
}
