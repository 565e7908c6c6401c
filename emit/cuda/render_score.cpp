// The flash form's score chain (contract: render.hpp): S's contraction, the element-wise score
// maps and P's argument as one fp32 expression per element of the score tile, with the arrays
// the maps read bounded at the tile's edge, for both flash variants.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

ScoreChain score_chain(Context& c, const FlashForm& f, const NodeOverride& over, const NodeOverride& interior) {
  ScoreChain s;
  s.value = c.value(*f.score, over, f.inlined);
  s.bounded = c.value(*f.score, bounded_loads(c, over, {f.M, f.x}, f.inlined), f.inlined);
  s.interior = interior ? c.value(*f.score, interior, f.inlined) : s.value;
  s.reads_rows = c.value(*f.score, bounded_loads(c, over, {f.M}, f.inlined), f.inlined) != s.value;
  return s;
}

void score_comment(Code& k, const FlashForm& f) {
  k.line("// " + f.S->name + " and " + f.P->name +
         (f.normaliser_lemma.empty() ? " element by element; keys past N_" + f.x + " give P = 0" : "'s argument element by element; keys past N_" + f.x + " are masked"));
}

}  // namespace napkin::cuda
