/** \file eval.hpp
 *  The reference evaluator: runs a verified diagram on the CPU in fp64. It is the ground truth
 *  for every later correctness check (the derived CPU loop nests, the emitted CUDA kernels).
 *
 *  Semantics (docs/diagram-language.md): contractions and reductions accumulate in fp64;
 *  softmax(X; a) = exp(X - max_a X) / sum_a exp(X - max_a X); layernorm uses the population
 *  variance, (X - mean) / sqrt(var + eps) * W + B; rmsnorm is X / sqrt(mean(X^2) + eps) * W; eps
 *  defaults to 1e-5; gelu is the exact erf form x/2 (1 + erf(x / sqrt 2)), gelu_tanh its tanh
 *  approximation x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); mask puts -inf where
 *  the mask is 0; causal(q, x) is 1 where index(x) <= index(q). A statement with a dtype label is
 *  rounded to that dtype (round_to_dtype); outputs are kept in fp64, unrounded.
 */
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"
#include "diagrams/tensor.hpp"

namespace napkin {

/** Largest evaluation accepted, in scalar operations (multiply-adds, exps, ...): about a minute
 *  of CPU. Larger diagrams are refused with a UserError that suggests --set. */
inline constexpr double kMaxEvalWork = 4e9;
/** Largest tensor accepted, in elements (2^28 fp64 = 2 GiB): inputs, statements and every
 *  intermediate of an expression (a contraction inside a sum included). */
inline constexpr std::int64_t kMaxEvalElements = kMaxTensorElements;

/** Estimated work of evaluating `d` at `sizes`, in scalar operations (calls included): each
 *  expression's operations plus one per element of every input made and every statement stored.
 *  Raises UserError when an array would exceed kMaxEvalElements. */
double estimate_work(const Program& p, const Diagram& d, const SizeMap& sizes);

/** Raises UserError when evaluating `d` at `sizes` exceeds kMaxEvalWork, or when an input or an
 *  intermediate array exceeds kMaxEvalElements. Cheap: call it before making inputs. */
void check_eval_limits(const Program& p, const Diagram& d, const SizeMap& sizes);

/** A seeded random input: standard normal values (Box-Muller over a 64-bit Mersenne twister
 *  seeded from `seed` and the input's name) rounded to the input's dtype; integer inputs are
 *  uniform over the dtype's range, or over [0, index_bound) when given (gather targets: see
 *  target_bounds). Same seed, same values, on every machine. */
Tensor random_input(const InputDecl& in, const SizeMap& sizes, std::uint64_t seed,
                    std::optional<std::int64_t> index_bound = std::nullopt);

/** The inputs of `d` that are the targets T of a gather(L, T; v) or pick(L, T; v) of its
 *  statements (d expanded or not), each with the smallest size N_v at `sizes` of the axes it
 *  indexes: the bound random_input draws them under so that every target is in range. */
std::map<std::string, std::int64_t> target_bounds(const Diagram& d, const SizeMap& sizes);

/** Evaluates `d` (verified) with `inputs` (one per input, axes as declared) at `sizes`.
 *  Returns every output by name. Raises UserError when the work or a tensor exceeds the limits
 *  above, or a call's sizes do not resolve. */
std::map<std::string, Tensor> evaluate(const Program& p, const Diagram& d, const SizeMap& sizes,
                                       const std::map<std::string, Tensor>& inputs);

}  // namespace napkin
