// `napkin emit --target torch`: the module of every bundled diagram matches its golden file
// (tests/golden/torch/), and it and the modules of 200 random diagrams (every operation kind,
// calls woven over extra axes, names that are Python keywords) are valid Python (ast.parse by
// python3). Their numbers are checked where torch is: tools/torch_vs_eval.py against the
// evaluator, kernels/reference/compare_torch.py generic on the device.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "emit/torch_emitter.hpp"
#include "tests/support/random_diagram.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;
namespace fs = std::filesystem;

namespace {

std::string module_of(const LoadedDiagram& l) {
  DiagnosticEngine diags;
  std::string text = emit_torch(*l.program, *l.diagram, l.sizes, diags);
  INFO(diags.render());
  REQUIRE_FALSE(diags.has_errors());
  return text;
}

/** Runs python3's ast.parse on every file of `files`; REQUIREs that all parse and that every
 *  helper they use (a name starting with '_') is defined at the module's top level. */
void require_python_parses(const std::vector<std::string>& files) {
  const char* script =
      "import ast, sys\n"
      "for f in sys.argv[1:]:\n"
      "    t = ast.parse(open(f).read(), f)\n"
      "    top = {n.name for n in t.body if isinstance(n, ast.FunctionDef)}\n"
      "    top |= {g.id for n in t.body if isinstance(n, ast.Assign) for g in n.targets if isinstance(g, ast.Name)}\n"
      "    used = {n.id for n in ast.walk(t) if isinstance(n, ast.Name) and n.id.startswith(\"_\")}\n"
      "    if used - top: sys.exit(f + \": undefined helpers \" + str(sorted(used - top)))\n"
      "print(len(sys.argv) - 1, \"parsed\")\n";
  const fs::path py = fs::temp_directory_path() / ("napkin-torch-parse-" + std::to_string(getpid()) + ".py");
  std::ofstream(py) << script;
  std::string cmd = std::string(NAPKIN_PYTHON3) + " " + py.string();
  for (const auto& f : files) cmd += " " + f;
  RunResult r = run_shell(cmd);
  fs::remove(py);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find(std::to_string(files.size()) + " parsed") != std::string::npos);
}

fs::path fresh_dir(const std::string& what) {
  fs::path dir = fs::temp_directory_path() / ("napkin-torch-" + what + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("every bundled diagram's torch module matches its golden file and parses as Python", "[emit][torch][golden]") {
  fs::path dir = fresh_dir("library");
  std::vector<std::string> files;
  for (const auto& path : library_files()) {
    INFO(path);
    LoadedDiagram l = load_library(path);
    std::string text = module_of(l);
    std::string stem = fs::path(path).stem().string();
    check_golden("torch/" + stem + ".py", text);
    CHECK(text.find("def _d_" + l.diagram->name + "(") != std::string::npos);
    files.push_back((dir / (stem + ".py")).string());
    std::ofstream(files.back()) << text;
  }
  require_python_parses(files);
  fs::remove_all(dir);
}

TEST_CASE("the torch modules of 200 random diagrams parse as Python", "[emit][torch][property]") {
  fs::path dir = fresh_dir("random");
  std::vector<std::string> files;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    std::string text = random_diagram(seed, "random", seed % 2 == 0);
    INFO("seed " << seed << "\n" << text);
    LoadedDiagram l = load_text(text);
    files.push_back((dir / ("r" + std::to_string(seed) + ".py")).string());
    std::ofstream(files.back()) << module_of(l);
  }
  require_python_parses(files);
  fs::remove_all(dir);
}

TEST_CASE("torch modules rename arrays that Python reserves and weave calls over extra axes", "[emit][torch]") {
  LoadedDiagram l = load_text(
      "diagram inner\naxis t = 4\naxis m = 6\nin X[t,m] : fp32\nin W[m] : bf16\nY[m,t] = rmsnorm(X, W; m)\nout Y : fp32\n\n"
      "diagram outer\naxis b = 3\naxis c = 2 * b\naxis e = 5\nin def[c,b,e] : fp32\nin _w[c] : bf16\n"
      "R[c,b,e] = inner(def, _w; t=b, m=c)\nout R : bf16\n");
  std::string text = module_of(l);
  CHECK(text.find("a_def = _load(inputs[\"def\"], \"fp32\", ref)") != std::string::npos);
  CHECK(text.find("a__w = _load(inputs[\"_w\"], \"bf16\", ref)") != std::string::npos);
  // The woven axis e comes first in each argument, the callee's axes after it in its order; the
  // top diagram's arrays have no batch dimensions, so _w needs no leading one for e.
  CHECK(text.find("R = _woven(_d_inner({\"X\": a_def.movedim((-3, -2, -1), (-1, -2, -3)), \"W\": a__w}, "
                  "{\"m\": n[\"c\"], \"t\": n[\"b\"]}, ref, dev)[\"Y\"], (n[\"e\"],), 2)") != std::string::npos);
  CHECK(text.find("\"outer\": ((\"b\", (3,)), (\"c\", (2, \"b\")), (\"e\", (5,)), )") != std::string::npos);
  CHECK(text.find("\ndef outer(inputs, sizes=None, *, reference=False):\n") != std::string::npos);
}

TEST_CASE("torch modules apply every operation to tensors and to scalars (axis sizes, numbers)", "[emit][torch]") {
  std::string ops = "exp log relu gelu silu sigmoid tanh rsqrt sqrt abs gelu_tanh";
  std::string body = "diagram every\naxis d = 4\naxis x = 3\nin  X[d,x] : bf16\nin  M[x,d] : fp16\nin  I[x] : int32\n";
  std::string scalar = "-d / 2", tensor = "-X / 2";
  for (std::size_t at = 0, end; at < ops.size(); at = end + 1) {
    end = std::min(ops.find(' ', at), ops.size());
    std::string op = ops.substr(at, end - at);
    scalar = op + "(" + scalar + " * 0.5 + 1)";
    tensor = op + "(" + tensor + " * 0.5 + 1)";
  }
  body += "S[] = cast(" + scalar + ", fp8e4m3) + cast(d, int4) * sum(max(X; d); x) + mean(X; d, x)\n";
  body += "T[x,d] = mask(layernorm(" + tensor + ", cast(X, tf32); d, eps=1e-3), M) + rmsnorm(X, S; x) + causal(d, x)\n";
  body += "U[d,x] = pow(max(X, min(d, 2)), 1.5) + pow(d, -0.5) + max(min(X, M), pos(d) - pos(x)) + min(max(d, 1), 3)\n";
  body += "V[d,x] = mask(X, causal(d, x; window=2)) + mask(X, band(d, x; lo=-1, hi=1)) + band(x, d; lo=0, hi=2)\n";
  body += "Z[x] = logsumexp(X; d) + sum(l2norm(X; d); d)\n";
  body += "G[x] = gather(X, I; d) + sum(pick(X, I; d) * 2; d)\n";  // torch.gather, and a pick on its own
  body += "out S : fp32\nout T : fp16\nout U : fp32\nout V : fp32\nout Z : fp32\nout G : fp32\n";
  LoadedDiagram l = load_text(body);
  fs::path dir = fresh_dir("every");
  std::string text = module_of(l);
  for (const char* helper : {"_s_tanh(", "_s_gelu(", "_s_gelu_tanh(", "approximate='tanh')", "_s_rsqrt(", "_s_div(", "_round_scalar(", "_cast(", "torch.tanh(", "F.gelu(",
                             "_layer_norm(", "_rms_norm(", "masked_fill(", "_band(", ".amax(dim=", "torch.abs(", "_s_abs(",
                             "torch.pow(", "_s_pow(", "torch.fmax(", "torch.fmin(", "_s_fmin(", "_s_fmax(", "_pos(", "_gather(",
                             "torch.where("})
    CHECK(text.find(helper) != std::string::npos);
  std::ofstream(dir / "every.py") << text;
  require_python_parses({(dir / "every.py").string()});
  fs::remove_all(dir);
}

TEST_CASE("torch modules of expressions nested 250 deep parse (temporaries every 16 levels)", "[emit][torch]") {
  std::string unary = "X", binary = "X";
  for (int i = 0; i < 250; ++i) unary = "exp(" + unary + ")";
  for (int i = 0; i < 120; ++i) binary = "(" + binary + " + X * 2)";
  LoadedDiagram l = load_text("diagram deep\naxis a = 3\nin  X[a] : fp32\nin  tmp_0[a] : fp32\nY[a] = " + unary + " + tmp_0\nZ[a] = " + binary +
                              "\nout Y : fp32\nout Z : fp32\n");
  std::string text = module_of(l);
  std::size_t temporaries = 0;
  for (std::size_t at = text.find("\n    tmp_"); at != std::string::npos; at = text.find("\n    tmp_", at + 1)) ++temporaries;
  CHECK(temporaries == 250 / 16 + 2 * (120 / 16));  // every 16th level of each statement (a sum and a product per level of Z)
  CHECK(text.find("a_tmp_0 = _load(inputs[\"tmp_0\"]") != std::string::npos);  // an array so named is renamed
  fs::path dir = fresh_dir("deep");
  std::ofstream(dir / "deep.py") << text;
  require_python_parses({(dir / "deep.py").string()});
  fs::remove_all(dir);
}

TEST_CASE("napkin emit --target torch: sizes from --set, located error past einsum's 52 axes", "[emit][torch][cli]") {
  RunResult ok = run_napkin("emit " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/attention.napkin --target torch --set q=64");
  REQUIRE(ok.status == 0);
  CHECK(ok.output.find("SIZES = {\"b\": 1, \"h\": 32, \"q\": 64, \"x\": 8192, \"d\": 128}") != std::string::npos);

  fs::path dir = fresh_dir("errors");
  std::string text = "diagram wide\n", axes;
  for (int i = 0; i < 53; ++i) {
    text += "axis a" + std::to_string(i) + " = 1\n";
    axes += (i ? "," : "") + std::string("a") + std::to_string(i);
  }
  text += "in  X[" + axes + "] : fp32\nY[a0] = contract(X, X; " + axes.substr(3) + ")\nout Y : fp32\n";
  std::ofstream(dir / "wide.napkin") << text;
  RunResult bad = run_napkin("emit " + (dir / "wide.napkin").string() + " --target torch -o " + (dir / "wide.py").string());
  CHECK(bad.status == 1);
  CHECK(bad.output.find("wide.napkin:56:9: error: the torch target writes a contraction as torch.einsum, which names at most 52 axes; this one has 53") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "wide.py"));  // no half-written output

  RunResult sched = run_napkin("emit " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/matmul.napkin --target torch --schedule x.schedule");
  CHECK(sched.status == 1);
  CHECK(sched.output.find("--schedule does not apply to --target torch") != std::string::npos);
  fs::remove_all(dir);
}
