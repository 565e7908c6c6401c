/** \file random_diagram.hpp
 *  A generator of random, valid diagram files for property tests: axes, inputs, and statements
 *  drawn from every operation kind (maps, broadcasting arithmetic, contractions, reductions,
 *  softmax, normalisations, masks (plain, windowed and band), casts, abs, the built-ins
 *  logsumexp and l2norm; reductions that read reductions over the same axis, in
 *  lemma forms (logsumexp, centred variance) and others; normalisers inside expressions and
 *  written as expressions), with comments and labels (levels, group and stream sizes). The same
 *  seed gives the same text. The extended grammar (the soundness fuzzer's, tests/soundness) adds
 *  positions as values (`X - 0.5 * (pos(a) - pos(b))`, ALiBi-like, also inside masks and
 *  softmaxes), gathers of int32 targets (`gather(X, T; v)`, cross-entropy, a gather of a
 *  softmax) and calls of a small callee diagram written first in the same file, woven over the
 *  caller's extra axes; its draws come from a second generator, so that the plain grammar's
 *  texts stay those of earlier versions, seed for seed.
 */
#pragma once
#include <cstdint>
#include <string>

namespace napkin::test {

/** Text of a random diagram named `name` that verifies without errors. Axis sizes are
 *  1..max_size (6: the evaluator runs it in microseconds). `labels` adds memory levels and
 *  partition sizes; `extended` positions as values and calls (the file then holds the callee
 *  first and `name` last). */
std::string random_diagram(std::uint64_t seed, const std::string& name = "random", bool labels = true, int max_size = 6,
                           bool extended = false);

}  // namespace napkin::test
