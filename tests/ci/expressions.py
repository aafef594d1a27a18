"""GitHub Actions expressions (`${{ ... }}`), the part workflows and
composite actions use: contexts (`inputs.name`, `steps.run.outputs.x`,
`github.run_id`, `env.X`, `secrets.X`, `vars.X`), string, number and boolean
literals, `== != < > <= >= && || !`, parentheses, and the functions
always(), success(), failure(), cancelled(), contains(), startsWith(),
endsWith(), format(). Values follow GitHub's rules: a missing property is
null, `||` and `&&` give an operand (not a boolean), string comparison
ignores case, null renders as ''."""
import re

TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<op>==|!=|<=|>=|&&|\|\||[!<>(),\[\]])
  | (?P<dot>\.)
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
)""", re.X)


def tokenize(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read the expression at {text[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


def truthy(value):
    return value not in (None, False, 0, "", 0.0)


def render(value):
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def compare(a, b):
    if isinstance(a, str) and isinstance(b, str):
        return a.lower(), b.lower()
    def num(v):
        if v is None:
            return 0
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, (int, float)):
            return v
        try:
            return float(v) if str(v).strip() else 0
        except ValueError:
            return float("nan")
    return num(a), num(b)


class Parser:
    def __init__(self, tokens, ctx, status):
        self.tokens, self.i, self.ctx, self.status = tokens, 0, ctx, status

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        value = self.or_()
        if self.i != len(self.tokens):
            raise ValueError(f"unexpected {self.peek()[1]!r}")
        return value

    def or_(self):
        value = self.and_()
        while self.peek()[1] == "||":
            self.take()
            right = self.and_()
            value = value if truthy(value) else right
        return value

    def and_(self):
        value = self.unary()
        while self.peek()[1] == "&&":
            self.take()
            right = self.unary()
            value = right if truthy(value) else value
        return value

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not truthy(self.unary())
        return self.comparison()

    def comparison(self):
        left = self.primary()
        op = self.peek()[1]
        if op in ("==", "!=", "<", ">", "<=", ">="):
            self.take()
            a, b = compare(left, self.primary())
            return {"==": a == b, "!=": a != b, "<": a < b, ">": a > b,
                    "<=": a <= b, ">=": a >= b}[op]
        return left

    def primary(self):
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if text == "(":
            value = self.or_()
            self.take(")")
            return value
        if kind != "name":
            raise ValueError(f"unexpected {text!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self.peek()[1] == "(":
            self.take()
            args = []
            while self.peek()[1] != ")":
                args.append(self.or_())
                if self.peek()[1] == ",":
                    self.take()
            self.take(")")
            return self.call(text, args)
        value = self.ctx.get(text)
        while self.peek()[0] == "dot" or self.peek()[1] == "[":
            if self.take()[0] == "dot":
                key = self.take()[1]
            else:
                key = self.or_()
                self.take("]")
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def call(self, name, args):
        failed = self.status.get("failed", False)
        lowered = [render(a).lower() for a in args]
        functions = {
            "always": lambda: True,
            "success": lambda: not failed,
            "failure": lambda: failed,
            "cancelled": lambda: False,
            "contains": lambda: lowered[1] in lowered[0],
            "startsWith": lambda: lowered[0].startswith(lowered[1]),
            "endsWith": lambda: lowered[0].endswith(lowered[1]),
            "format": lambda: re.sub(r"\{(\d+)\}", lambda m: render(args[int(m.group(1)) + 1]),
                                     render(args[0])),
        }
        if name not in functions:
            raise ValueError(f"function {name}() is not supported")
        return functions[name]()


def evaluate(text, ctx, status=None):
    return Parser(tokenize(text), ctx, status or {}).parse()


def substitute(text, ctx):
    """TEXT with each `${{ expr }}` replaced by its value, as GitHub does."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: render(evaluate(m.group(1), ctx)), text, flags=re.S)
