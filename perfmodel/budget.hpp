/** \file budget.hpp
 *  The training budget of a model made of one diagram's block repeated L times (`napkin budget`):
 *  parameters, compute, time, memory per GPU and MFU, from the diagram and its derived kernels.
 *  docs/budget.md states every formula with its source; in short:
 *  - Weights are the block's inputs that carry no token axis; activations carry one or more
 *    (split_inputs). P = L * (sum of the weights' elements) + the embedding and head.
 *  - Compute: C = 6PD (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §2.1: 2PD
 *    forward, 4PD backward). The exact count takes the forward FLOPs of the derived kernels
 *    (attention's N^2 terms included) and the standard estimate backward = 2 x forward.
 *  - Memory per parameter: mixed precision with fp32 master weights (Micikevicius et al. 2018),
 *    bf16 + Adam = 2 + 2 + 4 + 4 + 4 = 16 bytes (Rajbhandari et al. 2020, ZeRO, §3.1); 8-bit Adam
 *    keeps its two moments in 1 byte each (Dettmers et al. 2022).
 *  - Activations: the arrays the backward reads, taken from the diagram (saved_activations), with
 *    and without recomputation (Korthikanti et al. 2022, "Reducing Activation Recomputation in
 *    Large Transformer Models").
 *  Nothing here derives or prices a kernel: the caller passes the derived block's forward time and
 *  FLOPs (cli/cmd_budget.cpp runs the derivation).
 */
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "diagrams/diagnostics.hpp"
#include "diagrams/ir.hpp"
#include "diagrams/sizes.hpp"
#include "lower/options.hpp"

namespace napkin {

enum class Optimizer { adamw, adamw8bit, sgd };
enum class Checkpointing { none, full, selective };

/** The block's inputs split into weights (parameters) and activations. */
struct InputSplit {
  std::vector<std::string> token_axes;  ///< the axes that index tokens, as named in the diagram
  std::int64_t tokens = 0;              ///< tokens one run of the block processes: product of token_axes' sizes
  std::vector<const InputDecl*> weights, activations;
  std::int64_t params = 0;  ///< sum over the weights of their element counts
};

/** Splits `d`'s inputs: an input that carries any token axis is an activation, any other is a
 *  weight. `token_axes` names the token axes (`--tokens-axis`); empty: every axis of the diagram's
 *  first output but its last (the layout [tokens.., features]: Y[b,s,m] gives b and s), and then
 *  every activation must carry all of them. Reports a located error to `diags` and returns nullopt
 *  when a named axis is not the diagram's, the output has fewer than two axes and none are named,
 *  an input carries some default token axes but not all (the split is ambiguous: name them), or
 *  no input carries a token axis. */
std::optional<InputSplit> split_inputs(const Diagram& d, const SizeMap& sizes, const std::vector<std::string>& token_axes,
                                       DiagnosticEngine& diags);

/** Bytes per parameter of each training state, by precision and optimizer. */
struct BytesPerParam {
  double weights = 0;    ///< the working copy the kernels read: 2 (bf16) or 1 (fp8)
  double grads = 0;      ///< gradients in the working precision: 2 (bf16) or 1 (fp8e5m2)
  double optimizer = 0;  ///< fp32 master copy (4) + states: AdamW 4 + 4, 8-bit AdamW 1 + 1, SGD momentum 4
};

/** Per-parameter bytes for `precision` (bf16 or fp8e4m3; raises UserError otherwise) and `opt`.
 *  bf16 + AdamW: 2 + 2 + 12 = 16 (ZeRO §3.1); bf16 + 8-bit AdamW: 2 + 2 + 6 = 10; bf16 + SGD
 *  with momentum: 2 + 2 + 8 = 12; fp8 stores weights and gradients in one byte each (Micikevicius
 *  et al. 2022, "FP8 Formats for Deep Learning": e4m3 forward, e5m2 gradients), the master copy
 *  and the optimizer states as above. */
BytesPerParam bytes_per_param(DType precision, Optimizer opt);

/** One diagram of a derived block: the block itself or a callee lifted over a call (each call
 *  once, a callee called twice appears twice), with its sizes and the arrays its chosen kernels
 *  keep on chip (fused away: recomputed, never stored). */
struct DerivedDiagram {
  const Diagram* diagram = nullptr;
  SizeMap sizes;
  std::set<std::string> on_chip;
  bool callee = false;  ///< inputs and outputs are the caller's arrays, counted there
};

/** Bytes of one block's activations that a training step keeps for its backward. */
struct SavedActivations {
  double all = 0;     ///< every activation array some statement reads (no recomputation)
  double stored = 0;  ///< those the derived kernels write to or read from HBM (the fused-away ones recomputed)
  double inputs = 0;  ///< the block's activation inputs (the checkpoint of full recomputation)
};

/** The arrays the backward of `diagrams` (the block first) reads: every activation input of the
 *  block and every statement array read by a later statement of its diagram (the operands of each
 *  step's gradient); the block's weights are not activations. Bytes at storage_dtype(opt). */
SavedActivations saved_activations(const std::vector<DerivedDiagram>& diagrams, const InputSplit& split,
                                   const ModelOptions& opt);

/** Activation bytes per GPU for L layers (Korthikanti et al. 2022): none keeps every array
 *  the backward reads, L * all; selective keeps what the derived kernels store and recomputes the
 *  fused-away arrays (attention's N^2 scores), L * stored; full keeps each layer's input and
 *  recomputes one layer at a time, L * inputs + stored. */
double activation_bytes(const SavedActivations& a, std::int64_t layers, Checkpointing c);

/** What `napkin budget` is asked. */
struct BudgetInput {
  std::int64_t layers = 1, gpus = 1;
  double tokens = 0;                         ///< D, training tokens
  DType precision = DType::bf16;
  Optimizer optimizer = Optimizer::adamw;
  Checkpointing checkpointing = Checkpointing::none;
  std::int64_t vocab = 0, width = 0;         ///< --embedding V,d; 0: none
  bool tied = false;                         ///< the head shares the embedding table
};

/** The derived figures of one block and of the head, per run of the block (split.tokens tokens). */
struct BlockFigures {
  InputSplit split;
  SavedActivations saved;
  double forward_seconds = 0, forward_flops = 0;            ///< the block's derived kernels
  double head_seconds = 0, head_flops = 0, head_saved = 0;  ///< the head's (0 without --embedding)
  double peak_flops_per_s = 0;                              ///< the GPU's tensor-core peak at the precision
};

/** The budget (docs/budget.md). */
struct Budget {
  std::int64_t params = 0, block_params = 0, embedding_params = 0;
  double flops_6pd = 0;    ///< 6 * P * D
  double flops_exact = 0;  ///< 3 * (L * block + head) forward FLOPs * D / tokens per run
  double seconds = 0;      ///< wall clock on G GPUs, data parallel, communication not counted
  double gpu_seconds_per_token = 0;
  double step_seconds = 0;  ///< one run of L blocks and the head, forward and backward, on one GPU
  double weights = 0, grads = 0, optimizer = 0, activations = 0;  ///< bytes per GPU
  double mfu = 0;           ///< 6PD / seconds / (G * peak)
  double recompute_factor = 3;  ///< step time over forward time: 3, or 4 with full recomputation
};

/** Joins the block's figures to the model: see Budget's fields. Backward = 2 x forward (Kaplan et
 *  al. 2020; Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters");
 *  full recomputation runs the forward once more (4 x forward; Chen et al. 2016). Raises
 *  UserError when P is 0 (nothing to train). */
Budget compute_budget(const BudgetInput& in, const BlockFigures& block);

}  // namespace napkin
