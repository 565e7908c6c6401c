/** \file unit.hpp
 *  One diagram's CUDA as a namespace: its `Args` (device pointers of the inputs, outputs and the
 *  intermediates kept in HBM, and `N_<axis>` sizes in elements), the device code of every schedule
 *  kernel, and the host functions `bind_workspace`, `workspace_bytes`, `run_kernel`, `run_all`.
 *  emit/cuda_emitter.cpp wraps the top diagram's unit with the C entry points; a call of another
 *  diagram (emit/cuda/call.cpp) nests the callee's unit inside the caller's namespace.
 */
#pragma once
#include <map>
#include <string>

#include "emit/cuda/context.hpp"
#include "hardware/hardware.hpp"

namespace napkin::cuda {

/** The text of one diagram's namespace and what the file around it needs to know. */
struct Unit {
  std::string code;           ///< `namespace <ns> { ... }`
  bool hopper = false;        ///< some kernel has an sm_90a variant (the preamble's Hopper block)
  std::vector<std::string> kernel_names, strategies;  ///< per schedule kernel
  std::vector<std::string> schedule;                   ///< describe_plan() of each kernel, callees' after
  std::vector<std::pair<std::size_t, std::string>> nested;  ///< callees' units `code` refers to (empty when top)
};

/** The placeholder for nested unit `id` in the code of a unit below the top (KernelEmit::nested). */
std::string nested_marker(std::size_t id);
/** A fresh id for nested_marker(), unique within the process. */
std::size_t next_nested_id();

/** Emits `d` scheduled as `dv` as namespace `ns`. With `top`, also the host support the C
 *  entry points use (error and variant strings) and `make_args`. Raises UserError for what a
 *  strategy cannot emit (dtypes, call arguments that are not plain arrays in the callee's layout). */
Unit emit_unit(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw, const EmitOptions& opt,
               const std::string& ns, bool top);

}  // namespace napkin::cuda
