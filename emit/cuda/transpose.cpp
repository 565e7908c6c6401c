// Strategy transpose: one copy Y = X into another order of the same axes with another innermost
// axis (lower/transpose_form.hpp). Contract: see strategies.hpp. A block takes a T x T tile over
// the two innermost axes (X's, `i`, and Y's, `o`) of one slice of the other axes: each warp loads
// T / WARPS rows of the tile along i (a lane T / 32 columns, 32 apart: every warp access 32
// consecutive elements) into SMEM, and after a barrier stores T / WARPS rows along o, reading the
// tile transposed (rows padded by one word: no bank conflicts either way). Elements past the
// extents are neither read nor written.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

KernelEmit emit_transpose(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  NAPKIN_ASSERT(spec.transpose.has_value()) << "transpose kernel " << kc.plan.name << " has no transpose form";
  const TransposeForm& f = *spec.transpose;
  const std::string ns = kernel_ns(kc.plan.name), &i = f.in_inner, &o = f.out_inner;
  Code k;
  k.line(describe_plan(kc.plan));
  k.line("// strategy transpose: " + f.statement + " = " + f.source + " with " + o + " innermost instead of " + i + ": tiles of " +
         std::to_string(TransposeForm::T) + " x " + std::to_string(TransposeForm::T) + " through SMEM, loaded along " + i + ", stored along " + o);
  k.open("namespace " + ns);
  k.line("constexpr int WARPS = " + std::to_string(TransposeForm::warps) + ", THREADS = WARPS * 32, T = " + std::to_string(TransposeForm::T) + ";");
  open_bounded_kernel(k, c, f.registers, f.blocks_per_sm, "lower/transpose_form.hpp");
  k.line("__shared__ float tile[T][T + 1];  // SMEM: rows along " + o + ", columns along " + i);
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
  k.line("// grid: tiles of " + i + " (fastest) x tiles of " + o + (f.batch.empty() ? std::string() : " x " + join(f.batch)));
  k.line("int64_t bid = blockIdx.x;");
  k.line("const int64_t tiles_" + i + " = (N_" + i + " + T - 1) / T, tiles_" + o + " = (N_" + o + " + T - 1) / T;");
  k.line("const int64_t o_" + i + " = bid % tiles_" + i + " * T;");
  k.line("bid /= tiles_" + i + ";");
  k.line("const int64_t o_" + o + " = bid % tiles_" + o + " * T;");
  k.line("bid /= tiles_" + o + ";");
  decompose(k, "bid", f.batch);
  auto walk = [&](const std::string& row_axis, const std::string& col_axis, const std::string& body) {
    k.line("#pragma unroll");
    k.open("for (int rr = 0; rr < T / WARPS; ++rr)");
    k.line("#pragma unroll");
    k.open("for (int cc = 0; cc < T / 32; ++cc)");
    k.line("const int r = warp + rr * WARPS, col = lane + cc * 32;");
    k.line("const int64_t i_" + row_axis + " = o_" + row_axis + " + r, i_" + col_axis + " = o_" + col_axis + " + col;");
    k.line(body);
    k.close();
    k.close();
  };
  k.line("// load along " + i + ": the tile's rows are " + o + ", its columns " + i + " (every load issued before the first store)");
  walk(o, i, "tile[r][col] = i_" + o + " < N_" + o + " && i_" + i + " < N_" + i + " ? " + c.load(f.source) + " : 0.0f;");
  k.line("__syncthreads();");
  k.line("// store along " + o + ": row r of the stores is column r of the tile");
  walk(i, o, "if (i_" + o + " < N_" + o + " && i_" + i + " < N_" + i + ") a." + f.statement + "[" + c.index(f.statement) + "] = napkin::from_f<" +
                 c.ctype_of(f.statement) + ">(tile[col][r]);");
  --k.indent;
  k.line("}");
  k.close("  // namespace " + ns);
  KernelEmit r;
  r.strategy = "transpose";
  r.stored.insert(f.statement);
  r.device_code = k.text;
  Code l;
  std::string blocks = "((a.N_" + i + " + " + std::to_string(TransposeForm::T - 1) + ") / " + std::to_string(TransposeForm::T) + ") * ((a.N_" + o + " + " +
                       std::to_string(TransposeForm::T - 1) + ") / " + std::to_string(TransposeForm::T) + ")";
  for (const auto& b : f.batch) blocks += " * a.N_" + b;
  grid_launch(l, blocks, ns);
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
