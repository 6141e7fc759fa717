"""STAGE 3 — VJP rules of the elementwise and host primitives. Each rule gets the op, the
cotangents of its outputs, and which inputs need one; it emits graph IR for the inputs'
cotangents. Operands broadcast, so each cotangent is summed back to its operand's shape."""

import math

import numpy as np

from ..errors import DloopNotImplementedError
from ..ir import prims
from .vjp import VJP_RULES

P = prims.REGISTRY


def conj(em, x):
    """The complex conjugate of x; x itself when real. Cotangents of complex values are
    dL/dRe + i dL/dIm, so a holomorphic f(x) passes g * conj(f'(x)) back, and a product
    a * b passes g * conj(b) to a."""
    return em.op("conj", x) if x.aval.dtype.kind == "c" else x


def _unary(derivative):
    """derivative(em, x, y) -> dy/dx, for y = f(x)."""
    def rule(em, op, bars, needs, context):
        x, y, g = op.inputs[0], op.outputs[0], bars[0]
        return [em.mul(g, conj(em, derivative(em, x, y)))]
    return rule


def _one(em, x):
    return em.lit(1.0, x)


def _reciprocal(em, x):
    return em.op("div", _one(em, x), x)


def _one_minus_square(em, x):
    """1 - x^2 as (1 - x)(1 + x): 1 - x x cancels near |x| = 1, where asin's and acos's
    slopes are largest (3e-7 of them off at x = 1 - 1e-10)."""
    return em.mul(em.op("sub", _one(em, x), x), em.add(_one(em, x), x))


def _tanh_slope(em, x, y):
    """sech(x)^2 as 4 e / (1 + e)^2 with e = exp(-2 |x|), whose terms are all positive:
    1 - tanh(x)^2 cancels from |x| = 1 on (1e-8 of the slope off at x = 10, all of it from
    19, where tanh rounds to 1). A complex x keeps 1 - y^2."""
    if x.aval.dtype.kind == "c":
        return em.op("sub", _one(em, x), em.mul(y, y))
    e = em.op("exp", em.mul(em.op("abs", x), em.lit(-2.0, x)))
    d = em.add(_one(em, x), e)
    return em.op("div", em.mul(e, em.lit(4.0, x)), em.mul(d, d))


_DERIVATIVES = {
    "sin": lambda em, x, y: em.op("cos", x),
    "cos": lambda em, x, y: em.op("neg", em.op("sin", x)),
    "tan": lambda em, x, y: em.add(_one(em, x), em.mul(y, y)),
    "asin": lambda em, x, y: _reciprocal(em, em.op("sqrt", _one_minus_square(em, x))),
    "acos": lambda em, x, y: em.op("neg", _reciprocal(em, em.op(
        "sqrt", _one_minus_square(em, x)))),
    "atan": lambda em, x, y: _reciprocal(em, em.add(_one(em, x), em.mul(x, x))),
    "sinh": lambda em, x, y: em.op("cosh", x),
    "cosh": lambda em, x, y: em.op("sinh", x),
    "tanh": lambda em, x, y: _tanh_slope(em, x, y),
    "exp": lambda em, x, y: y,
    # exp(x), not y + 1: that cancels for x < 0 (0 from x = -38 on; boxcox's slope in x).
    "expm1": lambda em, x, y: em.op("exp", x),
    "log": lambda em, x, y: _reciprocal(em, x),
    "log1p": lambda em, x, y: _reciprocal(em, em.add(_one(em, x), x)),
    "log2": lambda em, x, y: _reciprocal(em, em.mul(x, em.lit(math.log(2.0), x))),
    "log10": lambda em, x, y: _reciprocal(em, em.mul(x, em.lit(math.log(10.0), x))),
    "sqrt": lambda em, x, y: em.op("div", em.lit(0.5, x), y),
    "abs": lambda em, x, y: em.op("sign", x),
}
for _name, _d in _DERIVATIVES.items():
    VJP_RULES[P[_name]] = _unary(_d)


def _zero_rule(em, op, bars, needs, context):
    return [None] * len(op.inputs)


for _name in ("sign", "floor", "ceil", "floordiv") + prims.COMPARE + prims.LOGICAL + ("not",):
    VJP_RULES[P[_name]] = _zero_rule


def _binary(rule_a, rule_b):
    """rule_x(em, a, b, y, g) -> cotangent of x before summing back to x's shape."""
    def rule(em, op, bars, needs, context):
        a, b = op.inputs
        y, g = op.outputs[0], bars[0]
        out = []
        for x, r, need in ((a, rule_a, needs[0]), (b, rule_b, needs[1])):
            out.append(em.unbroadcast(r(em, a, b, y, g), x.aval.shape) if need else None)
        return out
    return rule


def _pow_exponent_bar(em, a, b, y, g):
    positive = em.op("gt", a, em.lit(0.0, a))
    safe_a = em.op("select", positive, a, _one(em, a))
    return em.op("select", positive, em.mul(g, em.mul(y, em.op("log", safe_a))), em.lit(0.0, a))


def _complex_exponent_bar(em, a, b, y, g):
    """d(a^b)/db = a^b log a, taken as 0 where a is 0 (0^b is 0 or 1 around there)."""
    zero = em.op("eq", a, em.lit(0.0, a))
    safe_a = em.op("select", zero, _one(em, a), a)
    return em.op("select", zero, em.lit(0.0, a),
                 em.mul(g, conj(em, em.mul(y, em.op("log", safe_a)))))


def _max_min(compare):
    """The winner takes g; on a tie each operand takes g / 2 (JAX's and PyTorch's convention),
    so that compositions smooth at a == b (hypot, logaddexp) get their true gradient."""
    def pick(first):
        def r(em, a, b, y, g):
            take_a = em.op(compare, a, b)
            tie = em.op("eq", a, b)
            zero = em.lit(0.0, g)
            mine = em.op("select", take_a, g, zero) if first else em.op("select", take_a, zero, g)
            return em.op("select", tie, em.mul(g, em.lit(0.5, g)), mine)
        return r
    return _binary(pick(True), pick(False))


VJP_RULES[P["neg"]] = lambda em, op, bars, needs, context: [em.op("neg", bars[0])]
VJP_RULES[P["add"]] = _binary(lambda em, a, b, y, g: g, lambda em, a, b, y, g: g)
VJP_RULES[P["sub"]] = _binary(lambda em, a, b, y, g: g, lambda em, a, b, y, g: em.op("neg", g))
VJP_RULES[P["mul"]] = _binary(lambda em, a, b, y, g: em.mul(g, conj(em, b)),
                              lambda em, a, b, y, g: em.mul(g, conj(em, a)))
# b's cotangent -g conj(a / b^2) as -(g / conj(b)) conj(y): the quotient a's cotangent
# already is, so the compiled reverse divides once per division (a divider's throughput
# bounds Newton-like loops), with two roundings as before.
VJP_RULES[P["div"]] = _binary(
    lambda em, a, b, y, g: em.op("div", g, conj(em, b)),
    lambda em, a, b, y, g: em.op("neg", em.mul(em.op("div", g, conj(em, b)), conj(em, y))))


def _pow_base_bar(em, a, b, y, g):
    """d(a^b)/da = b a^(b-1), and 0 where b = 0 (a^0 is 1 everywhere, 0 * 0^-1 is NaN)."""
    zero = em.op("eq", b, em.lit(0.0, b))
    slope = em.mul(b, em.op("pow", a, em.op("sub", b, _one(em, b))))
    return em.op("select", zero, em.lit(0.0, g), em.mul(g, conj(em, slope)))


VJP_RULES[P["pow"]] = _binary(
    _pow_base_bar,
    lambda em, a, b, y, g: (_complex_exponent_bar if a.aval.dtype.kind == "c" else
                            _pow_exponent_bar)(em, a, b, y, g))
VJP_RULES[P["atan2"]] = _binary(
    lambda em, a, b, y, g: em.op("div", em.mul(g, b), em.add(em.mul(a, a), em.mul(b, b))),
    lambda em, a, b, y, g: em.op("neg", em.op("div", em.mul(g, a),
                                              em.add(em.mul(a, a), em.mul(b, b)))))
VJP_RULES[P["mod"]] = _binary(
    lambda em, a, b, y, g: g,
    lambda em, a, b, y, g: em.op("neg", em.mul(g, em.op("floordiv", a, b))))
VJP_RULES[P["max"]] = _max_min("ge")
VJP_RULES[P["min"]] = _max_min("le")


def _select_rule(em, op, bars, needs, context):
    c, a, b = op.inputs
    g = bars[0]
    zero = em.lit(0.0, g)
    return [None,
            em.unbroadcast(em.op("select", c, g, zero), a.aval.shape) if needs[1] else None,
            em.unbroadcast(em.op("select", c, zero, g), b.aval.shape) if needs[2] else None]


def _convert_rule(em, op, bars, needs, context):
    return [em.op("convert", bars[0], dtype=op.inputs[0].aval.dtype)]


def _broadcast_rule(em, op, bars, needs, context):
    return [em.unbroadcast(bars[0], op.inputs[0].aval.shape)]


VJP_RULES[prims.select_p] = _select_rule
VJP_RULES[prims.convert_p] = _convert_rule
VJP_RULES[prims.broadcast_p] = _broadcast_rule


def _keepdims(em, g, op):
    x = op.inputs[0]
    shape = tuple(1 if k in op.params["axes"] else d for k, d in enumerate(x.aval.shape))
    return em.broadcast(em.op("reshape", g, shape=shape), x.aval.shape)


def _reduce_rule(em, op, bars, needs, context):
    x, y, g = op.inputs[0], op.outputs[0], bars[0]
    kind = op.params["op"]
    if kind == "sum":
        return [_keepdims(em, g, op)]
    if kind == "prod":
        return [em.op("prod_vjp", x, g, axes=op.params["axes"])]
    # max / min: the cotangent is shared equally among the elements that attain the extremum.
    hit = em.op("convert", em.op("eq", x, _keepdims(em, y, op)), dtype=x.aval.dtype)
    count = em.op("reduce", hit, op="sum", axes=op.params["axes"])
    return [em.mul(hit, _keepdims(em, em.op("div", g, count), op))]


def _reshape_rule(em, op, bars, needs, context):
    return [em.op("reshape", bars[0], shape=op.inputs[0].aval.shape)]


def _transpose_rule(em, op, bars, needs, context):
    inverse = tuple(int(k) for k in np.argsort(op.params["axes"]))
    return [em.op("transpose", bars[0], axes=inverse)]


def _slice_rule(em, op, bars, needs, context):
    return [em.op("static_slice_vjp", bars[0], key=op.params["key"],
                  shape=op.inputs[0].aval.shape)]


def _gather_rule(em, op, bars, needs, context):
    table, idx = op.inputs[0], op.inputs[1:]
    if context == "body":
        # One element's contribution: added to the table's cotangent as an effect.
        em.emit(prims.accumulate_p, [table, *idx, bars[0]])
        return [None] * (1 + len(idx))
    return [em.op("scatter_add", bars[0], *idx, shape=table.aval.shape)] + [None] * len(idx)


VJP_RULES[prims.reduce_p] = _reduce_rule
VJP_RULES[prims.reshape_p] = _reshape_rule
VJP_RULES[prims.static_slice_p] = _slice_rule
VJP_RULES[prims.transpose_p] = _transpose_rule
VJP_RULES[prims.gather_p] = _gather_rule


# Special functions (ir/special.py): their true derivatives, not those of the expansions.
def _exp_square(em, y, scale):
    """exp(scale * y^2)."""
    return em.op("exp", em.mul(em.mul(y, y), em.lit(scale, y)))


_SPECIAL = {
    "erf": lambda em, x, y: em.mul(_exp_square(em, x, -1.0), em.lit(2 / math.sqrt(math.pi), x)),
    "erfc": lambda em, x, y: em.mul(_exp_square(em, x, -1.0),
                                    em.lit(-2 / math.sqrt(math.pi), x)),
    "erfinv": lambda em, x, y: em.mul(_exp_square(em, y, 1.0), em.lit(math.sqrt(math.pi) / 2, x)),
    "ndtri": lambda em, x, y: em.mul(_exp_square(em, y, 0.5), em.lit(math.sqrt(2 * math.pi), x)),
    "gammaln": lambda em, x, y: em.op("polygamma", x, n=0),
    # i0e' = i1e - sign(x) i0e
    "i0e": lambda em, x, y: em.op("sub", em.op("i1e", x), em.mul(em.op("sign", x), y)),
}
for _name, _d in _SPECIAL.items():
    VJP_RULES[P[_name]] = _unary(_d)


def _polygamma_rule(em, op, bars, needs, context):
    return [em.mul(bars[0], em.op("polygamma", op.inputs[0], n=op.params["n"] + 1))]


def _i1e_rule(em, op, bars, needs, context):
    """i1e' = i0e - i1e (sign(x) + 1/x), whose limit at 0 is 1/2."""
    x, y = op.inputs[0], op.outputs[0]
    zero = em.op("eq", x, em.lit(0.0, x))
    safe = em.op("select", zero, _one(em, x), x)
    slope = em.op("sub", em.op("i0e", x),
                  em.mul(y, em.add(em.op("sign", x), _reciprocal(em, safe))))
    return [em.mul(bars[0], em.op("select", zero, em.lit(0.5, x), slope))]


VJP_RULES[P["polygamma"]] = _polygamma_rule
VJP_RULES[P["i1e"]] = _i1e_rule


def _incomplete_gamma_rule(sign):
    """d/dx P(a, x) = x^(a-1) e^-x / Gamma(a) (Q: its negative). The derivative in a has no
    closed form: asking for it is an error, not a zero."""
    def rule(em, op, bars, needs, context):
        a, x = op.inputs
        if needs[0]:
            raise DloopNotImplementedError(
                f"the gradient of {op.prim.name}(a, x) with respect to a is not available; "
                "pass a as a constant (differentiate with respect to x only)", op.src)
        log_density = em.op("sub", em.op("sub", em.mul(em.op("sub", a, _one(em, a)),
                                                       em.op("log", x)), x),
                            em.op("gammaln", a))
        # The density's limit at x = inf is 0; its log there is inf - inf.
        density = em.op("select", em.op("eq", x, em.lit(math.inf, x)), em.lit(0.0, x),
                        em.op("exp", log_density))
        slope = em.mul(density, em.lit(sign, x))
        return [None, em.unbroadcast(em.mul(bars[0], slope), x.aval.shape)]
    return rule


VJP_RULES[P["gammainc"]] = _incomplete_gamma_rule(1.0)
VJP_RULES[P["gammaincc"]] = _incomplete_gamma_rule(-1.0)


def _zeta_rule(em, op, bars, needs, context):
    """d/ds zeta(s, q) is zeta_ds (its own expansion); d/dq zeta(s, q) = -s zeta(s + 1, q)."""
    s, q = op.inputs
    g = bars[0]
    gs = em.unbroadcast(em.mul(g, em.op("zeta_ds", s, q)), s.aval.shape) if needs[0] else None
    gq = em.unbroadcast(em.mul(g, em.op("neg", em.mul(s, em.op("zeta", em.add(s, _one(em, s)),
                                                                q)))), q.aval.shape) \
        if needs[1] else None
    return [gs, gq]


VJP_RULES[P["zeta"]] = _zeta_rule
