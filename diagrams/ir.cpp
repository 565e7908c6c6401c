#include "diagrams/ir.hpp"

#include <array>

namespace napkin {

bool ExprPtr::operator==(const ExprPtr& o) const {
  if (ptr == o.ptr) return true;
  if (!ptr || !o.ptr) return false;
  return *ptr == *o.ptr;
}

ExprPtr make_ref(std::string name, SourceLoc loc, std::optional<MemLevel> level) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::ref;
  e->name = std::move(name);
  e->loc = loc;
  e->level = level;
  return {std::move(e)};
}

ExprPtr make_number(Number n, SourceLoc loc) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::number;
  e->number = std::move(n);
  e->loc = loc;
  return {std::move(e)};
}

ExprPtr make_apply(Op op, std::vector<ExprPtr> args, SourceLoc loc) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::apply;
  e->op = op;
  e->args = std::move(args);
  e->loc = loc;
  return {std::move(e)};
}

ExprPtr rebuild(const Expr& e) { return {std::make_shared<Expr>(e)}; }

ExprPtr replace_node(const ExprPtr& e, const Expr* target, const ExprPtr& by) {
  if (e.ptr.get() == target) return by;
  bool changed = false;
  std::vector<ExprPtr> args;
  for (const auto& a : e->args) {
    args.push_back(replace_node(a, target, by));
    changed |= args.back().ptr != a.ptr;
  }
  if (!changed) return e;
  auto n = std::make_shared<Expr>(*e);
  n->args = std::move(args);
  return {std::move(n)};
}

std::set<std::string> declared_names(const Diagram& d) {
  std::set<std::string> out;
  for (const auto* a : d.axes()) out.insert(a->name);
  for (const auto* i : d.inputs()) out.insert(i->name);
  for (const auto* s : d.statements()) out.insert(s->name);
  return out;
}

std::string claim_name(const std::string& base, std::set<std::string>& taken) {
  std::string n = base;
  for (int i = 1; taken.count(n); ++i) n = base + "_" + std::to_string(i);
  taken.insert(n);
  return n;
}

ExprPtr find_node(const ExprPtr& e, const Expr* target) {
  if (e.ptr.get() == target) return e;
  for (const auto& a : e->args)
    if (auto f = find_node(a, target)) return f;
  return {};
}

namespace {
template <class T>
const T* find_item(const std::vector<Item>& items, const std::string& n) {
  for (const auto& it : items)
    if (const T* p = std::get_if<T>(&it); p && p->name == n) return p;
  return nullptr;
}
template <class T>
std::vector<const T*> all_items(const std::vector<Item>& items) {
  std::vector<const T*> out;
  for (const auto& it : items)
    if (const T* p = std::get_if<T>(&it)) out.push_back(p);
  return out;
}
}  // namespace

const AxisDecl* Diagram::find_axis(const std::string& n) const { return find_item<AxisDecl>(items, n); }
const InputDecl* Diagram::find_input(const std::string& n) const { return find_item<InputDecl>(items, n); }
const Statement* Diagram::find_statement(const std::string& n) const { return find_item<Statement>(items, n); }
std::vector<const AxisDecl*> Diagram::axes() const { return all_items<AxisDecl>(items); }
std::vector<const InputDecl*> Diagram::inputs() const { return all_items<InputDecl>(items); }
std::vector<const Statement*> Diagram::statements() const { return all_items<Statement>(items); }
std::vector<const OutputDecl*> Diagram::outputs() const { return all_items<OutputDecl>(items); }

const std::vector<std::string>* Diagram::array_axes(const std::string& n) const {
  if (const auto* i = find_input(n)) return &i->axes;
  if (const auto* s = find_statement(n)) return &s->axes;
  return nullptr;
}

namespace {
// The element-wise max and min are spelled like the reduction max: the parser tells them apart by
// their operands (max(X; v) reduces, max(A, B) is element-wise); builtin_op("max") is Op::max.
constexpr std::array<std::pair<Op, std::string_view>, 38> kOps{{
    {Op::neg, "neg"},         {Op::exp, "exp"},         {Op::log, "log"},
    {Op::relu, "relu"},       {Op::gelu, "gelu"},       {Op::silu, "silu"},
    {Op::sigmoid, "sigmoid"}, {Op::tanh, "tanh"},       {Op::rsqrt, "rsqrt"},
    {Op::sqrt, "sqrt"},       {Op::add, "add"},         {Op::sub, "sub"},
    {Op::mul, "mul"},         {Op::div, "div"},         {Op::contract, "contract"},
    {Op::sum, "sum"},         {Op::max, "max"},         {Op::mean, "mean"},
    {Op::softmax, "softmax"}, {Op::layernorm, "layernorm"}, {Op::rmsnorm, "rmsnorm"},
    {Op::mask, "mask"},       {Op::causal, "causal"},   {Op::cast, "cast"},
    {Op::call, "call"},       {Op::abs, "abs"},         {Op::pow, "pow"},
    {Op::minimum, "min"},     {Op::maximum, "max"},     {Op::band, "band"},
    {Op::pos, "pos"},         {Op::logsumexp, "logsumexp"}, {Op::l2norm, "l2norm"},
    {Op::gather, "gather"},   {Op::pick, "pick"},       {Op::step, "step"},
    {Op::erf, "erf"},         {Op::gelu_tanh, "gelu_tanh"},
}};
}  // namespace

std::string_view op_name(Op op) {
  for (const auto& [o, n] : kOps)
    if (o == op) return n;
  return "?";
}

std::optional<Op> builtin_op(std::string_view name) {
  // add/sub/mul/div/neg/call are spelled as operators or by a diagram's name, never by keyword.
  for (const auto& [o, n] : kOps)
    if (n == name && o != Op::add && o != Op::sub && o != Op::mul && o != Op::div && o != Op::neg &&
        o != Op::call && o != Op::maximum)
      return o;
  return std::nullopt;
}

bool is_normaliser(const Expr& e) { return e.kind == Expr::Kind::apply && (e.op == Op::softmax || e.op == Op::layernorm || e.op == Op::rmsnorm); }

bool is_elementwise(Op op) {
  switch (op) {
    case Op::neg: case Op::exp: case Op::log: case Op::relu: case Op::gelu: case Op::gelu_tanh: case Op::silu:
    case Op::sigmoid: case Op::tanh: case Op::rsqrt: case Op::sqrt: case Op::add: case Op::sub:
    case Op::mul: case Op::div: case Op::cast: case Op::mask: case Op::abs: case Op::step: case Op::erf: case Op::pow:
    case Op::minimum: case Op::maximum: case Op::pick:
      return true;
    default:
      return false;
  }
}

bool is_positional(Op op) { return op == Op::causal || op == Op::band || op == Op::pos; }

MaskBand mask_band(const Expr& e) {
  auto integer = [&](const char* key) -> std::optional<std::int64_t> {
    for (const auto& b : e.bindings)
      if (b.key == key && b.number) return static_cast<std::int64_t>(b.number->value);
    return std::nullopt;
  };
  MaskBand m;
  if (e.op == Op::band) {
    m.lo = integer("lo").value_or(0);
    m.hi = integer("hi").value_or(0);
  } else if (auto w = integer("window")) {
    m.lo = 1 - *w;
  }
  return m;
}

std::string picked_axis(const Expr& e) {
  if (e.kind != Expr::Kind::apply) return "";
  if (e.op == Op::pick && e.axes.size() == 1) return e.axes[0];
  for (const auto& a : e.args)
    if (std::string v = picked_axis(*a); !v.empty()) return v;
  return "";
}

bool is_plain_causal(const Expr& e) {
  return e.kind == Expr::Kind::apply && e.op == Op::causal && e.bindings.empty();
}

}  // namespace napkin
