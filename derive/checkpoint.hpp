/** \file checkpoint.hpp
 *  Recompute or save (activation checkpointing): for each forward array the backward reads, whether
 *  the forward stores it in HBM for the backward or the backward recomputes it, chosen by the
 *  model's predicted time under a memory budget.
 *
 *  The backward of diagrams/grad.hpp recomputes every forward statement it reads from the inputs
 *  and the saved row statistics (the FlashAttention choice: least memory). Saving an array A costs
 *  its bytes (elements x its stored dtype's size) of HBM from the forward to the backward, and
 *  changes the time of both: the forward must write A (a fused A, like attention's P, then is
 *  stored), the backward reads A instead of recomputing what leads to it. Both are priced by
 *  deriving the forward and the backward (derive.hpp) and taking the predicted times.
 *
 *  The choice: each candidate A (a statement the backward recomputes) alone is priced, forward plus
 *  backward; candidates that save time are taken greedily by seconds saved per byte while their
 *  bytes fit the budget; the chosen set is priced together (savings need not add up: two arrays may
 *  save the same recomputation) and kept only if it beats recomputing everything. Then one pass of
 *  local search: each candidate in turn is added to the set (where its bytes still fit) or taken
 *  out of it, and the change kept where the set's predicted time falls. An array that alone saves
 *  nothing may pay beside the others: SwiGLU's G = silu(G_v), recomputed from a saved G_v, is
 *  stored for 0 us more by the dual GEMM's epilogue that already writes G_v, U and H, and the
 *  backward no longer recomputes it (t = 2048 on the H200: 3065.9 -> 3027.5 us predicted).
 *  Prices: 1 + candidates alone + 1 + candidates again (more where the local search keeps a
 *  change), each a derive of the forward and backward; the candidates alone, and the local search's
 *  trials, are priced on up to the machine's hardware threads at once (the choice is the same as
 *  one thread's).
 */
#pragma once
#include <string>
#include <vector>

#include "derive/derivation.hpp"

namespace napkin {

/** One array the backward could save instead of recomputing. */
struct CheckpointCandidate {
  std::string array;
  double bytes = 0;          ///< HBM kept from the forward to the backward, bytes
  double seconds = 0;        ///< predicted forward + backward time when it alone is saved, s
  bool fits = false;         ///< bytes within the budget
  bool chosen = false;
};

struct CheckpointPlan {
  std::vector<std::string> save;               ///< the chosen arrays (empty: recompute everything)
  std::vector<CheckpointCandidate> candidates;  ///< every array the backward recomputes
  double budget_bytes = 0;
  double saved_bytes = 0;                      ///< bytes of `save`
  double seconds_recompute = 0;                ///< predicted forward + backward, nothing saved, s
  double seconds = 0;                          ///< predicted forward + backward with `save`, s
  int refined = 0;                             ///< changes the local search kept
};

/** Chooses what to save (above) for the gradient of `d` with respect to `wrt` (grad.hpp) at
 *  `sizes` (d's axes; `--set`) on `hw` within `budget_bytes` (>= 0). Raises UserError as
 *  differentiate() and derive() do. */
CheckpointPlan plan_checkpointing(const Program& p, const Diagram& d, const std::vector<std::string>& wrt,
                                  const SizeMap& sizes, const Hardware& hw, double budget_bytes);

}  // namespace napkin
