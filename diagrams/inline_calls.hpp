/** \file inline_calls.hpp
 *  Inlining calls: a verified diagram with calls of other diagrams becomes one flat diagram with
 *  the same meaning and no calls, the form reverse mode (grad.hpp) differentiates.
 *
 *  Each call is replaced by its callee lifted over the call's woven axes (lift.hpp), spliced into
 *  the caller, innermost calls first and until none is left (a callee's own calls are inlined in
 *  turn, in the caller's namespace):
 *  - the lifted callee's axes become the caller's axes they bind (woven axes and bound callee
 *    axes); a callee axis that no call binds is declared in the caller, under its own name or
 *    `<callee>_<axis>` when the caller uses that name (its size, a literal or a product, renamed);
 *  - callee axes bound to one caller axis (self-attention's `q=s, x=s`): the first takes it, each
 *    other gets an axis of its own, `<callee>_<axis>`, declared as that caller axis (`axis
 *    gqa_attention_x = s`), and the arguments read along it are copied onto it by the identity
 *    matrix, `contract(K, band(s, gqa_attention_x; lo=0, hi=0); s)` (exact for finite values);
 *  - each input of the callee becomes its argument: the argument array itself, or a new statement
 *    `<S>_arg<i>` holding an argument that is an expression (S the calling statement);
 *  - each statement of the callee becomes a statement `<S>_<name>` (the first free name), but its
 *    output: when the call is the whole right-hand side of S, the output's statement is S itself
 *    (S's layout, dtype, level and comments); else it is a new statement `<S>_<callee>` that the
 *    call's place refers to.
 *  Names are made fresh against every axis and array of the caller. The result verifies as the
 *  caller does (the test inlines every bundled diagram and evaluates both in fp64).
 */
#pragma once
#include "diagrams/program.hpp"

namespace napkin {

/** `d` (a verified diagram of `p`) with every call inlined (above); `d` itself when it calls
 *  nothing. Raises UserError where lifting a call does (lift.hpp: a call whose output does not
 *  depend on a woven axis), naming the calling statement. */
Diagram inline_calls(const Program& p, const Diagram& d);

}  // namespace napkin
