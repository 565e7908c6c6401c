// napkin_torch's C++ fast path (module napkin_torch_fast, built by fastpath.py against the running
// torch): one napkin operator at one set of input shapes, forward and backward, called without
// Python between the caller and the emitted kernels' C entry point.
//
// Why: on the H200 host of session 24, one eager call of an operator through the Python road
// (ops.py: checks, autograd.Function, torch.empty per output, ctypes) cost 60-100 us of host time
// for 8-19 us of napkin_run, and a backward's Python ran on the autograd thread under the GIL; the
// training step's GPU idled behind it (docs/benchmarks.md, sessions 23-24).
//
// Contract: `Launch` holds what ops.py's _Launch holds (the C entry point's address, the expected
// input dtypes and shapes, the outputs' shapes and dtypes, the sizes array, the workspace bytes)
// and runs it on the current CUDA stream of the inputs' device. `Op` pairs the forward Launch with
// the backward Launch for the shapes the forward produces, and the wiring ops.py's Operator
// derives from the grad signature (which backward input is a saved forward input, a saved forward
// output or a cotangent; which backward output is which input's gradient). `apply` (run_forward)
// runs the forward and, where grad mode is on and an input requires grad, records a `NapkinBackward` node
// (a torch::autograd::Node) that runs the backward Launch in C++ on the autograd engine's thread.
// It returns None when the tensors do not fit the Op exactly (count, device, dtype, shape): the
// caller takes the Python road then. Errors of a launch raise RuntimeError with the library's
// message. The results are those of the Python road bit for bit: the same kernels on the same
// arrays (python/tests/test_gpu.py checks it).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace napkin_fast {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

/** The emitted CUDA unit's C entry point (emit/cuda_emitter.hpp): inputs, outputs, sizes, workspace, stream. */
using RunFn = int (*)(const void* const*, void* const*, const int64_t*, void*, void*);
/** Its last error message (emit/cuda_emitter.hpp). */
using ErrorFn = const char* (*)();

/** torch's name of a dtype ("float32", "bfloat16", "float16") as a ScalarType; std::invalid_argument otherwise. */
at::ScalarType scalar_type(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  throw std::invalid_argument("napkin_torch_fast: no dtype '" + name + "' (float32, bfloat16, float16)");
}

/** One part of an operator at one set of input shapes (ops.py's _Launch): what napkin_run needs. */
struct Launch {
  RunFn run = nullptr;
  ErrorFn last_error = nullptr;
  std::string path;                              ///< the library, for error messages
  std::vector<at::ScalarType> in_dtypes;         ///< per input, the diagram's dtype
  std::vector<std::vector<int64_t>> in_shapes;   ///< per input, its shape (elements)
  std::vector<std::vector<int64_t>> out_shapes;  ///< per output, its shape (elements)
  std::vector<at::ScalarType> out_dtypes;
  std::vector<int64_t> sizes;                    ///< every axis's size, declaration order
  int64_t workspace = 0;                         ///< bytes of intermediates in HBM
  bool empty = false;                            ///< an output has no element: nothing to launch

  /** Whether `args` are CUDA tensors on one device with this part's dtypes and shapes. */
  bool fits(const std::vector<at::Tensor>& args) const {
    if (args.size() != in_dtypes.size() || args.empty()) return false;
    const auto dev = args[0].device();
    if (!dev.is_cuda()) return false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const at::Tensor& t = args[i];
      if (!t.defined() || t.device() != dev || t.scalar_type() != in_dtypes[i] || !t.sizes().equals(in_shapes[i])) return false;
    }
    return true;
  }

  /** The outputs (new tensors) of this part on `args` (which fit), launched on the current stream
   *  of their device. Inputs not contiguous or not 16-byte aligned (the kernels' vector loads)
   *  are copied first. Runs without recording autograd. Raises std::runtime_error when a launch fails. */
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& args) const {
    at::NoGradGuard no_grad;
    const auto dev = args[0].device();
    std::vector<at::Tensor> keep;
    std::vector<const void*> in;
    keep.reserve(args.size());
    in.reserve(args.size());
    for (at::Tensor t : args) {
      if (!t.is_contiguous()) t = t.contiguous();
      if (reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16) t = t.clone();
      in.push_back(t.data_ptr());
      keep.push_back(std::move(t));
    }
    const auto options = at::TensorOptions().device(dev);
    std::vector<at::Tensor> outs;
    std::vector<void*> out;
    outs.reserve(out_shapes.size());
    for (std::size_t i = 0; i < out_shapes.size(); ++i) {
      outs.push_back(at::empty(out_shapes[i], options.dtype(out_dtypes[i])));
      out.push_back(outs.back().data_ptr());
    }
    if (empty) return outs;
    at::Tensor ws = workspace > 0 ? at::empty({workspace}, options.dtype(at::kByte)) : at::Tensor();
    c10::cuda::CUDAGuard guard(dev);
    void* stream = c10::cuda::getCurrentCUDAStream(dev.index()).stream();
    if (run(in.data(), out.data(), sizes.data(), ws.defined() ? ws.data_ptr() : nullptr, stream) != 0)
      throw std::runtime_error("napkin_torch: " + path + ": " + (last_error ? last_error() : "launch failed"));
    return outs;
  }
};

/** Where one backward input comes from (ops.py: Operator._bwd_args, _saved_names). */
struct BwdArg {
  enum Kind { saved_input, saved_output, cotangent } kind;
  int index;               ///< the forward input's or output's position
  at::ScalarType dtype;    ///< a cotangent's dtype (the backward diagram's)
};

/** An operator at one set of input shapes: forward, backward and their wiring. */
struct Op {
  std::string name;
  std::shared_ptr<const Launch> fwd, bwd;
  std::vector<BwdArg> bwd_args;
  std::vector<int> grad_slots;  ///< backward output j is the gradient of forward input grad_slots[j]
};

/** The autograd node of one forward call: saves what the backward reads, runs the backward Launch. */
struct NapkinBackward : torch::autograd::Node {
  std::shared_ptr<const Op> op;
  std::vector<SavedVariable> saved;  ///< one per saved_input / saved_output entry of op->bwd_args, in order
  at::Device device = at::Device(at::kCUDA, 0);

  explicit NapkinBackward(std::shared_ptr<const Op> o) : op(std::move(o)) {}

  std::string name() const override { return "napkin::" + op->name + "Backward"; }

  variable_list apply(variable_list&& grads) override {
    std::vector<at::Tensor> args;
    args.reserve(op->bwd_args.size());
    std::size_t s = 0;
    for (const auto& a : op->bwd_args) {
      if (a.kind != BwdArg::cotangent) {
        args.push_back(saved[s++].unpack(a.kind == BwdArg::saved_output ? shared_from_this() : nullptr));
        continue;
      }
      at::Tensor g = a.index < static_cast<int>(grads.size()) ? grads[a.index] : at::Tensor();
      if (!g.defined()) g = at::zeros(op->fwd->out_shapes[a.index], at::TensorOptions().device(device).dtype(a.dtype));
      else if (g.scalar_type() != a.dtype) g = g.to(a.dtype);
      args.push_back(std::move(g));
    }
    if (!op->bwd->fits(args)) throw std::runtime_error("napkin_torch: " + op->name + ": the backward's arguments do not fit its kernels");
    std::vector<at::Tensor> outs = (*op->bwd)(args);
    variable_list result(num_outputs());
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const int slot = op->grad_slots[j];
      if (!should_compute_output(slot)) continue;
      const at::ScalarType want = op->fwd->in_dtypes[slot];
      result[slot] = outs[j].scalar_type() == want ? outs[j] : outs[j].to(want);
    }
    return result;
  }

  void release_variables() override {
    for (auto& v : saved) v.reset_data();
  }
};

/** The outputs of `op`'s forward on `inputs`, with a NapkinBackward node where autograd needs one;
 *  std::nullopt when `inputs` do not fit op's forward exactly. */
std::optional<std::vector<at::Tensor>> run_forward(const std::shared_ptr<const Op>& op, const std::vector<at::Tensor>& inputs) {
  if (!op->fwd->fits(inputs)) return std::nullopt;
  std::vector<at::Tensor> outs = (*op->fwd)(inputs);
  bool needs_grad = false;
  if (at::GradMode::is_enabled())
    for (const auto& t : inputs) needs_grad = needs_grad || t.requires_grad();
  if (!needs_grad) return outs;
  std::shared_ptr<NapkinBackward> node(new NapkinBackward(op), torch::autograd::deleteNode);
  node->device = inputs[0].device();
  torch::autograd::edge_list edges;
  edges.reserve(inputs.size());
  for (const auto& t : inputs) edges.push_back(torch::autograd::impl::gradient_edge(t));
  node->set_next_edges(std::move(edges));
  for (auto& o : outs) torch::autograd::set_history(o, node);
  for (const auto& a : op->bwd_args) {
    if (a.kind == BwdArg::saved_input) node->saved.emplace_back(inputs[a.index], false);
    else if (a.kind == BwdArg::saved_output) node->saved.emplace_back(outs[a.index], true);
  }
  return outs;
}

/** A Launch from ops.py's description: addresses of napkin_run and napkin_last_error, dtypes by name. */
std::shared_ptr<const Launch> make_launch(std::uintptr_t run, std::uintptr_t last_error, std::string path, const std::vector<std::string>& in_dtypes,
                                          std::vector<std::vector<int64_t>> in_shapes, std::vector<std::vector<int64_t>> out_shapes,
                                          const std::vector<std::string>& out_dtypes, std::vector<int64_t> sizes, int64_t workspace) {
  if (run == 0) throw std::invalid_argument("napkin_torch_fast: null napkin_run");
  if (in_dtypes.size() != in_shapes.size() || out_dtypes.size() != out_shapes.size())
    throw std::invalid_argument("napkin_torch_fast: one dtype per shape");
  auto l = std::make_shared<Launch>();
  l->run = reinterpret_cast<RunFn>(run);
  l->last_error = reinterpret_cast<ErrorFn>(last_error);
  l->path = std::move(path);
  for (const auto& d : in_dtypes) l->in_dtypes.push_back(scalar_type(d));
  for (const auto& d : out_dtypes) l->out_dtypes.push_back(scalar_type(d));
  l->in_shapes = std::move(in_shapes);
  l->out_shapes = std::move(out_shapes);
  l->sizes = std::move(sizes);
  if (l->sizes.empty()) l->sizes.push_back(0);  // napkin_run reads no size then; keep the pointer valid
  l->workspace = workspace;
  for (const auto& s : l->out_shapes)
    for (int64_t n : s) l->empty = l->empty || n == 0;
  return l;
}

/** An Op: bwd_args as (kind, index, dtype name) with kind "input", "output" or "cotangent". */
std::shared_ptr<const Op> make_op(std::string name, std::shared_ptr<const Launch> fwd, std::shared_ptr<const Launch> bwd,
                                  const std::vector<std::tuple<std::string, int, std::string>>& bwd_args, std::vector<int> grad_slots) {
  auto op = std::make_shared<Op>();
  op->name = std::move(name);
  op->fwd = std::move(fwd);
  op->bwd = std::move(bwd);
  for (const auto& [kind, index, dtype] : bwd_args) {
    BwdArg a{BwdArg::cotangent, index, at::kFloat};
    if (kind == "input") a.kind = BwdArg::saved_input;
    else if (kind == "output") a.kind = BwdArg::saved_output;
    else if (kind == "cotangent") a.dtype = scalar_type(dtype);
    else throw std::invalid_argument("napkin_torch_fast: backward argument kind '" + kind + "'");
    const std::size_t bound = a.kind == BwdArg::saved_input ? op->fwd->in_dtypes.size() : op->fwd->out_dtypes.size();
    if (index < 0 || static_cast<std::size_t>(index) >= bound) throw std::invalid_argument("napkin_torch_fast: backward argument index out of range");
    op->bwd_args.push_back(a);
  }
  if (bwd_args.size() != op->bwd->in_dtypes.size() || grad_slots.size() != op->bwd->out_dtypes.size())
    throw std::invalid_argument("napkin_torch_fast: the wiring does not match the backward's inputs and outputs");
  for (int s : grad_slots)
    if (s < 0 || static_cast<std::size_t>(s) >= op->fwd->in_dtypes.size()) throw std::invalid_argument("napkin_torch_fast: gradient slot out of range");
  op->grad_slots = std::move(grad_slots);
  return op;
}

}  // namespace napkin_fast

PYBIND11_MODULE(napkin_torch_fast, m) {
  namespace py = pybind11;
  using namespace napkin_fast;
  py::class_<Launch, std::shared_ptr<Launch>>(m, "Launch");
  py::class_<Op, std::shared_ptr<Op>>(m, "Op");
  m.def("make_launch", [](std::uintptr_t run, std::uintptr_t err, std::string path, std::vector<std::string> in_dtypes,
                          std::vector<std::vector<int64_t>> in_shapes, std::vector<std::vector<int64_t>> out_shapes,
                          std::vector<std::string> out_dtypes, std::vector<int64_t> sizes, int64_t workspace) {
          return std::const_pointer_cast<Launch>(make_launch(run, err, std::move(path), in_dtypes, std::move(in_shapes), std::move(out_shapes),
                                                             out_dtypes, std::move(sizes), workspace));
        });
  m.def("make_op", [](std::string name, std::shared_ptr<Launch> fwd, std::shared_ptr<Launch> bwd,
                      std::vector<std::tuple<std::string, int, std::string>> bwd_args, std::vector<int> grad_slots) {
          return std::const_pointer_cast<Op>(make_op(std::move(name), fwd, bwd, bwd_args, std::move(grad_slots)));
        });
  m.def("apply", [](std::shared_ptr<Op> op, std::vector<at::Tensor> inputs) { return napkin_fast::run_forward(op, inputs); },
        "The forward's outputs (a list) with autograd recorded, or None when the tensors do not fit the Op.");
  m.def("launch", [](std::shared_ptr<Launch> l, std::vector<at::Tensor> args) -> std::optional<std::vector<at::Tensor>> {
          if (!l->fits(args)) return std::nullopt;
          return (*l)(args);
        },
        "One part's outputs (no autograd), or None when the tensors do not fit.");
}
