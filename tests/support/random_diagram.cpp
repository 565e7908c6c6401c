#include "tests/support/random_diagram.hpp"

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace napkin::test {

namespace {

struct Array {
  std::string name;
  std::vector<std::string> axes;
};

class Generator {
 public:
  Generator(std::uint64_t seed, bool labels, int max_size, bool extended)
      : rng_(seed), ext_(seed ^ 0x9e3779b97f4a7c15ULL), labels_(labels), max_size_(max_size), extended_(extended) {}

  std::string run(const std::string& name) {
    out_ = "# random diagram, seed-generated\ndiagram " + name + "\n";
    int n_axes = pick(2, 5);
    for (int i = 0; i < n_axes; ++i) {
      std::string a(1, static_cast<char>('a' + i));
      axes_.push_back(a);
      out_ += "axis " + a + " = " + std::to_string(pick(1, max_size_));
      if (labels_ && chance(0.2)) out_ += " group " + std::to_string(pick(1, 4));
      if (labels_ && chance(0.2)) out_ += " stream " + std::to_string(pick(1, 4));
      out_ += chance(0.3) ? "  # axis " + a + "\n" : "\n";
    }
    static const char* dtypes[] = {"fp32", "bf16", "fp16", "tf32", "fp8e4m3", "fp8e5m2"};
    int n_inputs = pick(1, 3);
    for (int i = 0; i < n_inputs; ++i) {
      Array x{"X" + std::to_string(i), subset(1)};
      out_ += "in  " + x.name + axes_text(x.axes) + " : " + dtypes[pick(0, 5)] + (labels_ && chance(0.3) ? " @hbm" : "") + "\n";
      pool_.push_back(x);
    }
    int n_stmts = pick(1, 6);
    for (int i = 0; i < n_stmts; ++i) {
      statement("T" + std::to_string(i));
      if (extended_) extended_statement(std::to_string(i));
    }
    // Every input and statement is read or output, so the verifier has nothing to warn about.
    for (const auto& a : pool_)
      if (!read_.count(a.name)) out_ += "out " + a.name + " : " + dtypes[pick(0, 2)] + "\n";
    return callee_ + out_;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::vector<std::string> subset(std::size_t min) {
    std::vector<std::string> s;
    for (const auto& a : axes_)
      if (chance(0.55)) s.push_back(a);
    while (s.size() < min) {
      const auto& a = axes_[static_cast<std::size_t>(pick(0, static_cast<int>(axes_.size()) - 1))];
      if (std::find(s.begin(), s.end(), a) == s.end()) s.push_back(a);
    }
    std::shuffle(s.begin(), s.end(), rng_);
    return s;
  }
  static std::string axes_text(const std::vector<std::string>& a) {
    std::string s = "[";
    for (std::size_t i = 0; i < a.size(); ++i) s += (i ? "," : "") + a[i];
    return s + "]";
  }
  static std::string join(const std::vector<std::string>& a) {
    std::string s;
    for (std::size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
    return s;
  }
  const Array& any() { return pool_[static_cast<std::size_t>(pick(0, static_cast<int>(pool_.size()) - 1))]; }
  std::string ref(const Array& a) {
    read_.insert(a.name);
    static const char* levels[] = {"hbm", "l2", "smem", "reg"};
    return a.name + (labels_ && chance(0.15) ? std::string("@") + levels[pick(0, 3)] : "");
  }
  static std::vector<std::string> unite(const std::vector<std::string>& x, const std::vector<std::string>& y) {
    auto u = x;
    for (const auto& a : y)
      if (std::find(u.begin(), u.end(), a) == u.end()) u.push_back(a);
    return u;
  }

  void statement(const std::string& name) {
    const Array x = any();  // a copy: some kinds add an array to the pool first
    std::vector<std::string> axes = x.axes;
    std::string e;
    static const char* maps[] = {"exp", "relu", "gelu", "silu", "sigmoid", "tanh", "abs", "step", "erf", "gelu_tanh"};
    int kind = pick(0, 13);
    if (x.axes.empty() && kind >= 4 && kind != 9) kind = 0;  // these need an axis of x
    switch (kind) {
      case 0: e = std::string(maps[pick(0, 9)]) + "(" + ref(x) + ")"; break;
      case 1: {
        const Array& y = any();
        static const char* ops[] = {" + ", " - ", " * "};
        e = ref(x) + ops[pick(0, 2)] + ref(y);
        axes = unite(x.axes, y.axes);
        break;
      }
      case 2: case 3: {
        const Array& y = any();
        auto all = unite(x.axes, y.axes);
        std::vector<std::string> red;
        for (const auto& a : all)
          if (chance(0.4)) red.push_back(a);
        e = "contract(" + ref(x) + ", " + ref(y) + (red.empty() ? "" : "; " + join(red)) + ")";
        axes.clear();
        for (const auto& a : all)
          if (std::find(red.begin(), red.end(), a) == red.end()) axes.push_back(a);
        break;
      }
      case 4: {
        std::vector<std::string> red{x.axes[static_cast<std::size_t>(pick(0, static_cast<int>(x.axes.size()) - 1))]};
        static const char* reds[] = {"sum", "max", "mean"};
        e = std::string(reds[pick(0, 2)]) + "(" + ref(x) + "; " + red[0] + ")";
        axes.erase(std::find(axes.begin(), axes.end(), red[0]));
        break;
      }
      case 5: e = "softmax(" + ref(x) + "; " + x.axes[0] + ")"; break;
      case 6: e = "layernorm(" + ref(x) + "; " + x.axes.back() + ", eps=1e-5)"; break;
      case 7: e = "rmsnorm(" + ref(x) + "; " + x.axes.back() + ")"; break;
      case 8:
        if (x.axes.size() >= 2) {  // a plain, windowed or band mask (rows may be fully masked: -inf, no softmax)
          const int m = pick(0, 2);
          const std::string pair = x.axes[0] + ", " + x.axes[1];
          e = "mask(" + ref(x) + ", " + (m == 0 ? "causal(" + pair + ")" : m == 1 ? "causal(" + pair + "; window=3)" : "band(" + pair + "; lo=-1, hi=2)") + ")";
        }
        else e = "cast(" + ref(x) + ", bf16)";
        break;
      case 9: e = ref(x) + " * rsqrt(" + axes_[0] + ") - 0.5 / (1 + " + ref(x) + " * " + ref(x) + ")"; axes = x.axes; break;
      case 10: case 11: {  // a reduction reading another reduction over the same axis
        const std::string a = x.axes[static_cast<std::size_t>(pick(0, static_cast<int>(x.axes.size()) - 1))];
        std::vector<std::string> rest = x.axes;
        rest.erase(std::find(rest.begin(), rest.end(), a));
        const std::string inner = name + "r";
        static const char* forms[] = {"lse", "var", "sumvar", "crossmax", "scaled", "logsumexp"};
        std::string form = forms[pick(0, 5)];
        bool by_max = form == "lse" || form == "crossmax";
        out_ += inner + axes_text(rest) + " = " + (by_max ? "max(" : "mean(") + ref(x) + "; " + a + ")\n";
        pool_.push_back(Array{inner, rest});
        const std::string xs = ref(x), m = ref(pool_.back());
        if (form == "lse") e = m + " + log(sum(exp(" + xs + " - " + m + "); " + a + "))";          // online-rescaled-sum
        else if (form == "var") e = "mean((" + xs + " - " + m + ") * (" + xs + " - " + m + "); " + a + ")";  // chan-centred-moment
        else if (form == "sumvar") e = "sum((" + xs + " - " + m + ") * (" + xs + " - " + m + "); " + a + ") + " + m;
        else if (form == "logsumexp") e = "logsumexp(" + xs + "; " + a + ") - " + m;  // the built-in: expanded to lse
        else if (form == "crossmax") e = "sum((" + xs + " - " + m + ") * (" + xs + " - " + m + "); " + a + ")";  // no lemma: refused
        else e = "sum(" + xs + " * " + m + "; " + a + ")";  // no lemma: refused
        axes = rest;
        break;
      }
      case 12: {  // a normaliser inside an expression, or written as one
        const std::string a = x.axes.back();
        int f = pick(0, 3);
        if (f == 0) e = "rmsnorm(" + ref(x) + "; " + a + ") * 2 + " + ref(x);
        else if (f == 1) e = "exp(softmax(" + ref(x) + "; " + a + ")) - 1";
        else if (f == 2) e = ref(x) + " * rsqrt(sum(" + ref(x) + " * " + ref(x) + "; " + a + ") + 1)";
        else e = "l2norm(" + ref(x) + "; " + a + ", eps=1e-6) * 3";
        break;
      }
      default:  // a mask inside a normaliser
        if (x.axes.size() >= 2) e = "softmax(mask(" + ref(x) + ", causal(" + x.axes[0] + ", " + x.axes[1] + ")); " + x.axes[1] + ")";
        else e = "layernorm(" + ref(x) + " * 0.5; " + x.axes[0] + ")";
        break;
    }
    std::shuffle(axes.begin(), axes.end(), rng_);
    out_ += name + axes_text(axes) + (labels_ && chance(0.2) ? " @reg" : "") + " = " + e + "\n";
    pool_.push_back(Array{name, axes});
  }


  // The extended grammar: draws from ext_ only, so that the plain grammar's texts do not change.
  int ext_pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(ext_); }
  bool ext_chance(double p) { return std::uniform_real_distribution<double>(0, 1)(ext_) < p; }

  /** After statement `i`: sometimes a statement with positions as values, sometimes a call. */
  void extended_statement(const std::string& i) {
    if (ext_chance(0.35)) positional("P" + i);
    if (ext_chance(0.3)) call("C" + i);
    if (ext_chance(0.25)) gather("G" + i);
  }

  /** A gather of targets: a new int32 input T over the array's axes but one, v, and one of
   *  `gather(X, T; v)` (plain), `logsumexp(X; v) - gather(X, T; v)` (cross-entropy, a reduction
   *  read beside another over v) or a gather of a softmax along v (a normaliser inside it). */
  void gather(const std::string& name) {
    const Array x = pool_[static_cast<std::size_t>(ext_pick(0, static_cast<int>(pool_.size()) - 1))];
    if (x.axes.empty()) return;
    const std::string v = x.axes[static_cast<std::size_t>(ext_pick(0, static_cast<int>(x.axes.size()) - 1))];
    std::vector<std::string> rest = x.axes;
    rest.erase(std::find(rest.begin(), rest.end(), v));
    const std::string t = "I" + name;
    out_ += "in  " + t + axes_text(rest) + " : int32\n";
    read_.insert(x.name);
    std::string e;
    switch (ext_pick(0, 2)) {
      case 0: e = "gather(" + x.name + ", " + t + "; " + v + ")"; break;
      case 1: e = "logsumexp(" + x.name + "; " + v + ") - gather(" + x.name + ", " + t + "; " + v + ")"; break;
      default: e = "gather(softmax(" + x.name + "; " + v + "), " + t + "; " + v + ") * 2"; break;
    }
    std::shuffle(rest.begin(), rest.end(), ext_);
    out_ += name + axes_text(rest) + " = " + e + "\n";
    pool_.push_back(Array{name, rest});
  }

  /** Positions as values: an ALiBi-like bias, inside a softmax or a windowed mask, or scaled by
   *  the axis's size (a name of an axis in an expression is its size). */
  void positional(const std::string& name) {
    const Array x = pool_[static_cast<std::size_t>(ext_pick(0, static_cast<int>(pool_.size()) - 1))];
    if (x.axes.empty()) return;
    std::string e;
    const std::string a = x.axes[static_cast<std::size_t>(ext_pick(0, static_cast<int>(x.axes.size()) - 1))];
    read_.insert(x.name);
    if (x.axes.size() < 2) {
      e = x.name + " * pos(" + a + ") / " + a + " + 1";
    } else {
      std::string b = a;
      while (b == a) b = x.axes[static_cast<std::size_t>(ext_pick(0, static_cast<int>(x.axes.size()) - 1))];
      const std::string bias = "(pos(" + a + ") - pos(" + b + "))";
      switch (ext_pick(0, 3)) {
        case 0: e = x.name + " - 0.5 * " + bias; break;
        case 1: e = "softmax(" + x.name + " - 0.25 * " + bias + "; " + b + ")"; break;
        case 2: e = "mask(" + x.name + " - abs" + bias + " / 4, causal(" + a + ", " + b + "; window=3))"; break;
        default: e = x.name + " * pos(" + a + ") / " + a + " - pos(" + b + ")"; break;
      }
    }
    std::vector<std::string> axes = x.axes;
    std::shuffle(axes.begin(), axes.end(), ext_);
    out_ += name + axes_text(axes) + " = " + e + "\n";
    pool_.push_back(Array{name, axes});
  }

  /** A call of the callee (written on first use) on an array of two or more axes: u and v bound
   *  to two of them, woven over the rest; the result's axes are the callee's output axes,
   *  renamed, then the woven ones. */
  void call(const std::string& name) {
    std::vector<const Array*> wide;
    for (const auto& a : pool_)
      if (a.axes.size() >= 2) wide.push_back(&a);
    if (wide.empty()) return;
    const Array x = *wide[static_cast<std::size_t>(ext_pick(0, static_cast<int>(wide.size()) - 1))];
    if (callee_.empty()) write_callee();
    // Half the calls bind u, v to the argument's last two axes in order: the layout the CUDA
    // emitter passes (woven axes first); the others bind any two.
    std::vector<std::string> axes = x.axes;
    if (ext_chance(0.5)) std::rotate(axes.begin(), axes.end() - 2, axes.end());
    else std::shuffle(axes.begin(), axes.end(), ext_);
    const std::string u = axes[0], v = axes[1];
    std::vector<std::string> result;
    for (const auto& c : callee_out_) result.push_back(c == "u" ? u : v);
    for (std::size_t k = 2; k < axes.size(); ++k) result.push_back(axes[k]);
    read_.insert(x.name);
    out_ += name + axes_text(result) + " = " + callee_name_ + "(" + x.name + "; u=" + u + ", v=" + v + ")\n";
    pool_.push_back(Array{name, result});
  }

  /** One callee per file, input A[u,v], one output: a normaliser with a positional bias, a
   *  reduction, a normaliser inside an expression, a logsumexp written out, a mask, a mean. */
  void write_callee() {
    callee_name_ = "callee";
    callee_ = "diagram " + callee_name_ + "\naxis u = 3\naxis v = 4\nin  A[u,v] : fp32\n";
    switch (ext_pick(0, 5)) {
      case 0: callee_ += "Y[u,v] = softmax(A - 0.5 * (pos(u) - pos(v)); v)\n"; callee_out_ = {"u", "v"}; break;
      case 1: callee_ += "Y[u] = sum(exp(A) * A; v)\n"; callee_out_ = {"u"}; break;
      case 2: callee_ += "Y[u,v] = rmsnorm(A; v) * 2 + A\n"; callee_out_ = {"u", "v"}; break;
      case 3: callee_ += "M[u] = max(A; v)\nY[u] = M + log(sum(exp(A - M); v))\n"; callee_out_ = {"u"}; break;
      case 4: callee_ += "Y[u,v] = mask(A * 2, causal(u, v))\n"; callee_out_ = {"u", "v"}; break;
      default: callee_ += "Y[v] = mean(A; u)\n"; callee_out_ = {"v"}; break;
    }
    callee_ += "out Y : fp32\n\n";
  }

  std::mt19937_64 rng_;
  std::mt19937_64 ext_;
  bool labels_;
  int max_size_;
  bool extended_;
  std::string callee_, callee_name_;
  std::vector<std::string> callee_out_;
  std::string out_;
  std::vector<std::string> axes_;
  std::vector<Array> pool_;
  std::set<std::string> read_;
};

}  // namespace

std::string random_diagram(std::uint64_t seed, const std::string& name, bool labels, int max_size, bool extended) {
  return Generator(seed, labels, max_size, extended).run(name);
}

}  // namespace napkin::test
