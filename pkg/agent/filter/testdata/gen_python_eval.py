"""Writes python_eval.json: conditions evaluated by Python's eval, the way agent_v3.py evaluates a
layout filter's condition (eval(cond, None, {group: int(value)})), for expr_test.go to compare
against. Run from this directory with python3 (3.8+); the output is deterministic.

The expressions are drawn from the grammar the Go evaluator accepts (ints, True/False, names i
and j, unary + -, + - * // %, parentheses, == != < <= > >= chains, and/or/not) plus handwritten
cases; results whose magnitude needs more than 62 bits are left out (Go uses int64). Python
expressions the Go evaluator rejects on purpose although Python gives an int or a bool (i ** 2, ~i,
i & 1, i is j, x if c else y, ...) are tested in expr_test.go instead.
"""
import json
import random

VARS = [{"i": 0, "j": 1}, {"i": 3, "j": 4}, {"i": 7, "j": -2}, {"i": -5, "j": 0}]

HANDWRITTEN = [
    "True", " True", "\tFalse", "1", "0", "-0", "i", "not i", "not not i",
    "0 == i % 1", "i % 4 == 3", "-7 // 2", "-7 % 2", "7 // -2", "7 % -2", "-7 // -2", "-7 % -2",
    "i // j", "i % j", "1 < 2 < 3", "3 > 2 > 2", "1 < 2 > 0", "i == i == i", "0 < i <= 7",
    "True + True", "True * 3", "-True", "+False", "True == 1", "False == 0", "(True) + (1 < 2)",
    "0 or 5", "3 and 0", "0 and 1 // 0", "1 or 1 // 0", "0 > 1 < 1 // 0", "1 < 2 < 1 // i",
    "not 0 == 1", "not (0 == 1)", "(i or j) + 1", "(i and j) * 2", "i - -j", "- - i", "--i", "-+-i",
    "1_000 + 2", "0x1f + 0o17 + 0b101", "00 == 0", "0_0", "1 + 2 * 3 % 4 // 2 - 5",
    "2 * (3 + 4) // (1 + 1)", "i * j - j * i == 0", "i != j", "i >= j and j <= i or i == 3",
    "True # a comment", "i//j", "1//0", "1 % 0", "i % (j - j)", "(((((i)))))",
    "3 == 3 != 4", "not i == 0 and j", "abs(i)", "[i]", "i in j",
    "i / 2", "'a'", "None", "k", "1.5", "01", "1__0", "1_",
    "", "   ", "(", ")", "i ==", "== i", "not", "and", "i and", "lambda: 1", "i = 1", "i := 1",
]


def rand_expr(rng, depth):
    if depth <= 0 or rng.random() < 0.25:
        return rng.choice(["i", "j", "True", "False", str(rng.randint(0, 9)), str(rng.randint(0, 99))])
    kind = rng.randint(0, 6)
    if kind == 0:
        return "(" + rand_expr(rng, depth - 1) + ")"
    if kind == 1:
        return rng.choice(["-", "+", "- "]) + rand_arith_atom(rng, depth - 1)
    if kind == 2:
        return rand_expr_arith(rng, depth)
    if kind == 3:
        ops = [rng.choice(["==", "!=", "<", "<=", ">", ">="]) for _ in range(rng.randint(1, 3))]
        out = rand_expr_arith(rng, depth - 1)
        for op in ops:
            out += " " + op + " " + rand_expr_arith(rng, depth - 1)
        return out
    if kind == 4:
        return "not " + rand_expr(rng, depth - 1)
    op = rng.choice([" and ", " or "])
    return "(" + rand_expr(rng, depth - 1) + ")" + op + "(" + rand_expr(rng, depth - 1) + ")"


def rand_arith_atom(rng, depth):
    if depth <= 0 or rng.random() < 0.5:
        return rng.choice(["i", "j", "True", str(rng.randint(0, 20))])
    return "(" + rand_expr(rng, depth - 1) + ")"


def rand_expr_arith(rng, depth):
    out = rand_arith_atom(rng, depth - 1)
    for _ in range(rng.randint(1, 3)):
        out += " " + rng.choice(["+", "-", "*", "//", "%"]) + " " + rand_arith_atom(rng, depth - 1)
    return out


def evaluate(cond, env):
    try:
        v = eval(cond, {"__builtins__": {}}, dict(env))
    except Exception as e:  # noqa: BLE001 - every failure is recorded
        return {"error": type(e).__name__}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        if abs(v) >= 2**62:
            return None
        return {"int": v}
    return {"error": "NotIntOrBool:" + type(v).__name__}


def main():
    rng = random.Random(20240601)
    conds = list(HANDWRITTEN)
    seen = set(conds)
    while len(conds) < len(HANDWRITTEN) + 300:
        c = rand_expr(rng, 4)
        if c not in seen:
            seen.add(c)
            conds.append(c)
    cases = []
    for cond in conds:
        for env in VARS:
            r = evaluate(cond, env)
            if r is None:
                continue
            r.update({"cond": cond, "vars": env})
            cases.append(r)
    with open("python_eval.json", "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, sort_keys=True) for c in cases) + "\n]\n")


if __name__ == "__main__":
    main()
