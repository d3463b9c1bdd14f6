"""A seeded random generator of ClassAd expressions for differential testing.

Expressions are generated *typed*: asking for an ``int`` mostly yields expressions that evaluate to
an integer (literals, attributes of that type in the machine or job ad, arithmetic, functions that
return integers...), so most cases exercise the meaningful paths of operators and functions. A fixed
share of the choices is deliberately ill-typed (a string where a number is expected, a wrong
number of arguments, ``undefined``/``error`` operands, missing attributes) so the error paths get as
much exercise.

Everything the generator emits must be accepted by HTCondor's parser, so the differential tests can
compare values; malformed text is the business of the parser fuzzing in ``test_properties.py``.

The generated text is evaluated with MY = :data:`MACHINE_AD` and TARGET = :data:`JOB_AD`.
"""

from __future__ import annotations

import random
from typing import Callable

MACHINE_AD = """[
  MyType = "Machine"; TargetType = "Job";
  Name = "slot1@exec.example.org"; Machine = "exec.example.org";
  Arch = "X86_64"; OpSys = "LINUX"; OpSysAndVer = "AlmaLinux9";
  Memory = 2048; Cpus = 4; Disk = 35882000; KeyboardIdle = 1000; ConsoleIdle = 950;
  LoadAvg = 0.25; CondorLoadAvg = 0.0; TotalLoadAvg = 0.1;
  Mips = 3000; KFlops = 1234567;
  State = "Unclaimed"; Activity = "Idle";
  HasFileTransfer = true; IsWorkstation = false;
  StartdIpAddr = "<10.0.0.5:9618?alias=exec.example.org>";
  FileSystemDomain = "example.org";
  Groups = "physics,chemistry, Biology";
  Numbers = "1, 2.5, 3";
  Version = "8.9.11";
  Mixedcase = "MiXeD cAsE";
  EmptyStr = "";
  Slots = { 1, 2, 3, 4 };
  Names = { "alpha", "Beta", "gamma" };
  Reals = { 0.5, 2.25, -1.0 };
  Mixed = { 1, "two", 3.0, true, undefined, error, [ x = 1 ] };
  EmptyList = { };
  Nested = [ a = 1; b = "two"; c = { 1, 2 }; d = [ e = 5; f = a ]; g = Memory ];
  EmptyAd = [ ];
  Start = KeyboardIdle > 15 * 60 && LoadAvg < 0.3;
  Requirements = START && TARGET.RequestMemory <= Memory;
  Rank = TARGET.Department =?= "physics";
  LoopA = LoopB + 1; LoopB = LoopA;
  SelfLoop = SelfLoop;
  UsesTarget = TARGET.RequestMemory * 2;
  UsesJobOnly = ImageSize;
  BigInt = 9223372036854775807; SmallInt = -9223372036854775807;
  HugeReal = 1.5e300; TinyReal = 2.5e-300; Zero = 0; RZero = 0.0; NegReal = -3.75;
  Undef = undefined; Err = error;
  DayStart = absTime("2024-01-15T10:30:00Z");
  Uptime = relTime(3723)
]"""

JOB_AD = """[
  MyType = "Job"; TargetType = "Machine";
  Owner = "alice"; User = "alice@example.org"; Department = "physics";
  ClusterId = 42; ProcId = 3; JobPrio = -5; JobUniverse = 5; JobStatus = 1;
  RequestMemory = 1024; RequestCpus = 2; RequestDisk = 100000; ImageSize = 5000;
  Memory = 512;
  Cmd = "/bin/sleep"; Args = "60";
  Requirements = TARGET.Memory >= RequestMemory && TARGET.OpSys == "LINUX";
  Rank = TARGET.Mips / 1000.0;
  UsesMachineOnly = Cpus * 10;
  QDate = 1700000000; EnteredCurrentStatus = 1700000500;
  Env = "A=1;B=2"; Environment = "A=1 B='x y'";
  Arguments = "a 'b c' d";
  AcctGroup = "group_physics.alice";
  Tags = { "gpu", "fast" };
  Weights = { 0.5, 1.5, 2.0 };
  Inner = [ Memory = 64; x = Memory; y = TARGET.Memory; z = Owner ];
  Flag = false;
  Nothing = undefined;
  JobLoop = JobLoop2; JobLoop2 = JobLoop;
  Submitted = absTime(1700000000);
  WallClock = relTime(90061.5)
]"""

# Attributes by the type of their value, and where they live. ``both`` names exist in both ads.
ATTRS: dict[str, dict[str, list[str]]] = {
    "int": {
        "my": ["Memory", "Cpus", "Disk", "KeyboardIdle", "ConsoleIdle", "Mips", "KFlops", "BigInt",
               "SmallInt", "Zero"],
        "target": ["ClusterId", "ProcId", "JobPrio", "JobUniverse", "RequestMemory", "RequestCpus",
                   "RequestDisk", "ImageSize", "QDate", "Memory", "UsesMachineOnly"],
    },
    "real": {
        "my": ["LoadAvg", "CondorLoadAvg", "TotalLoadAvg", "HugeReal", "TinyReal", "RZero", "NegReal"],
        "target": ["Rank"],
    },
    "string": {
        "my": ["Name", "Machine", "Arch", "OpSys", "State", "Activity", "Groups", "Numbers", "Version",
               "Mixedcase", "EmptyStr", "StartdIpAddr", "MyType"],
        "target": ["Owner", "User", "Department", "Cmd", "Args", "Env", "Environment", "Arguments",
                   "AcctGroup", "MyType"],
    },
    "bool": {
        "my": ["HasFileTransfer", "IsWorkstation", "Start", "Requirements", "Rank"],
        "target": ["Flag", "Requirements"],
    },
    "list": {
        "my": ["Slots", "Names", "Reals", "Mixed", "EmptyList"],
        "target": ["Tags", "Weights"],
    },
    "record": {
        "my": ["Nested", "EmptyAd"],
        "target": ["Inner"],
    },
    "abstime": {"my": ["DayStart"], "target": ["Submitted"]},
    "reltime": {"my": ["Uptime"], "target": ["WallClock"]},
    "odd": {
        "my": ["LoopA", "LoopB", "SelfLoop", "Undef", "Err", "UsesTarget", "UsesJobOnly"],
        "target": ["JobLoop", "Nothing", "Inner", "UsesMachineOnly"],
    },
}
MISSING = ["NoSuchAttr", "Missing", "Gpus", "undefinedness"]

TYPES = ["int", "real", "bool", "string", "list", "record", "abstime", "reltime"]

STRING_LITS = [
    '""', '"a"', '"abc"', '"ABC"', '"Abc"', '"alice"', '"ALICE"', '"physics"', '"LINUX"', '"linux"',
    '"x86_64"', '"a,b,c"', '"b"', '"1,2,3"', '"1.5"', '"12abc"', '"  7 "', '"-3"', '"true"',
    '"1e3"', '"8.9.10"', '"8.10.0"', '"slot1@host"', '"user@domain"', '"a b"',
    r'"tab\there"', r'"new\nline"', r'"quote\"inside"', r'"back\\slash"', r'"oct\101\102"',
    r'"single\'q"', '"ünïcödé"', '"日本"', '"%d %s"', '"A=1;B=2"', '"a \'b c\' d"',
    '"2024-01-15T10:30:00Z"', '"1+02:03:04"', '"00:10"', '"nan"', '"inf"', '"-inf"',
]
REGEX_LITS = ['"^a"', '"A.*"', '"[0-9]+"', '"x|y"', '"^$"', '".*"', '"(a)(b)?"', '"phys"',
              '"^ALICE$"', '"\\\\d"', '"("', '"[z-a]"']
REGEX_OPTS = ['"i"', '""', '"f"', '"I"', '"g"', '"m"', '"s"', '"x"', '"ig"']
TIME_FORMATS = ['"%Y-%m-%d"', '"%H:%M:%S"', '"%j"', '"%a %b %d"', '"%Y%m%d%H%M%S"', '"%%"',
                '"%e|%y|%p"', '"%s"', '"plain"']
INT_LITS = ["0", "1", "2", "3", "7", "10", "42", "100", "1024", "65536", "2147483647", "2147483648",
            "4294967296", "9223372036854775807", "1000000000000"]
REAL_LITS = ["0.0", "0.5", ".5", "1.0", "1.5", "2.5e3", "1e-3", "1E10", "3.14159", "1e308", "1.7e308",
             "4.9e-324", "100.0", "2.0", "0.1", "123456789.123"]
ABSTIME_STRS = ['"2024-01-15T10:30:00Z"', '"2024-02-29T23:59:59+02:00"', '"1970-01-01T00:00:00Z"',
                '"2024-06-30T12:00:00-05:00"']
RELTIME_STRS = ['"1+02:03:04"', '"00:10"', '"-5"', '"2:00:00"', '"90"', '"1d"']
CMP_OPS = ["<", "<=", ">", ">=", "==", "!="]
META_OPS = ["=?=", "=!=", "is", "isnt", "IS", "ISNT"]
ARITH_OPS = ["+", "-", "*", "/", "%"]
BIT_OPS = ["&", "|", "^", "<<", ">>", ">>>"]

#: Function names by category; used for well-typed calls and, with random arguments, ill-typed ones.
FUNCTIONS = [
    "isUndefined", "isError", "isString", "isInteger", "isReal", "isList", "isClassAd",
    "isBoolean", "isAbstime", "isReltime", "member", "identicalMember", "size", "sum", "avg",
    "min", "max", "anyCompare", "allCompare", "getYear", "getMonth", "getDayOfYear",
    "getDayOfMonth", "getDayOfWeek", "getDays", "getHours", "getMinutes", "getSeconds",
    "splitTime", "formatTime", "strcat", "join", "toUpper", "toLower", "substr", "strcmp",
    "stricmp", "versioncmp", "versionLE", "versionLT", "versionGE", "versionGT", "versionEQ",
    "version_in_range", "regexp", "regexpMember", "regexps", "replace", "replaceAll", "int",
    "real", "string", "bool", "absTime", "relTime", "unparse", "unresolved", "floor", "ceil",
    "ceiling", "round", "pow", "quantize", "ifThenElse", "interval", "eval",
    "stringListsIntersect", "stringListSize", "stringListSum", "stringListAvg",
    "stringListMin", "stringListMax", "stringListMember", "stringListIMember",
    "stringList_regexpMember", "stringListSubsetMatch", "stringListISubsetMatch", "envV1ToV2",
    "mergeEnvironment", "listToArgs", "argsToList", "split", "splitUserName", "splitSlotName",
]


# Fixed argument choices for particular functions.
EVAL_ARGS = ['"1 + 2"', '"Memory * 2"', '"TARGET.Owner"', '"[a = 3].a"', '"bogus +"']
STRLIST_INTS = ['"1,2,3"', '"4, 5 ,6"', '""', '"1,x"', 'Numbers', '"7"']
STRLIST_REALS = ['"1,2,3"', '"1.5, 2.5"', '""', 'Numbers', '"a,b"']
QUANTUM_REALS = ['0.5', '2', '{ 0.25, 1.0 }', '{ }', '{ "x" }']
MEMBER_LISTS = ['Slots', 'Names', 'Mixed', 'Tags', '{ 1, 2, "a" }', '{ "ALPHA", 1.0 }', 'EmptyList']
STRLISTS = ['Groups', '"a,b,c"', '"A, B"', 'Numbers', '""']
VERSIONS = ['Version', '"8.10.0"', '"8.9.11"', '"10"']
RANGE_LOW = ['"8.0"', '"8.9.11"']
RANGE_HIGH = ['"9"', '"8.10"']
REGEX_LISTS = ['Names', 'Tags', 'Groups', '{ "a", 1 }']
JOIN_SEPS = ['", "', '""', '"-"']
JOIN_LISTS = ['Names', 'Tags', 'Slots', '{ "a", 1, 2.5, true }', '{}']
REPLACEMENTS = ['"X"', '"<\\\\0>"', '"\\\\1"', '""']
ENV_V1 = ['Env', '"A=1;B=2"', '""', '"bad"']
ARG_LISTS = ['{ "a", "b c" }', 'Tags', '{ }', '{ 1 }']
JOIN_SEPS2 = ['","', '" "']


class ExprGen:
    """Generates ClassAd expression text from a seed; ``expr(ty)`` asks for a value type."""

    def __init__(self, seed: int, max_depth: int = 4, ill_typed: float = 0.12) -> None:
        self.r = random.Random(seed)
        self.max_depth = max_depth
        self.ill_typed = ill_typed

    # ------------------------------------------------------------------ helpers
    def pick(self, seq: list[str]) -> str:
        return self.r.choice(seq)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def kw(self, word: str) -> str:
        """A keyword in a random letter case (they are case-insensitive)."""
        return self.pick([word, word.upper(), word.capitalize(), word.lower()])

    def paren(self, text: str, p: float = 0.7) -> str:
        """Usually parenthesise; sometimes not, so operator precedence is exercised too."""
        return f"({text})" if self.chance(p) else text

    def ws(self) -> str:
        """Blank space between tokens, now and then a comment."""
        x = self.r.random()
        if x < 0.03:
            return " /* note */ "
        if x < 0.045:
            return " // line comment\n "
        return " "

    def attr(self, ty: str) -> str:
        """A reference to an attribute of type ``ty``: scoped or unscoped, in MY or TARGET."""
        table = ATTRS[ty]
        where = self.pick(["my", "target"])
        names = table[where] or table["my"]
        name = self.pick(names)
        if self.chance(0.2):
            name = self.pick([name.lower(), name.upper()])
        style = self.r.random()
        if where == "my":
            if style < 0.5:
                return name
            return f"{self.pick(['MY', 'my', 'My'])}.{name}"
        if style < 0.3:
            return name  # unscoped: found in MY first, then TARGET
        return f"{self.pick(['TARGET', 'target', 'Target'])}.{name}"

    # ------------------------------------------------------------------ entry point
    def expr(self, ty: str = "any", depth: int = 0) -> str:
        """An expression meant to evaluate to ``ty`` (``"any"`` for any type)."""
        if ty == "any" or (depth > 0 and self.chance(self.ill_typed)):
            ty = self.pick(TYPES + ["odd"])
        if ty == "odd":
            return self.odd(depth)
        leaf = depth >= self.max_depth or self.chance(0.25 + 0.12 * depth)
        if not leaf and self.chance(0.08):
            return self.control(ty, depth)
        return getattr(self, f"g_{ty}")(depth, leaf)

    def sub(self, ty: str, depth: int) -> str:
        return self.expr(ty, depth + 1)

    def odd(self, depth: int) -> str:
        """undefined, error, missing attributes, circular references, odd function calls."""
        c = self.r.randrange(9)
        if c == 0:
            return self.kw("undefined")
        if c == 1:
            return self.kw("error")
        if c == 2:
            return self.pick(MISSING) if self.chance(0.5) else f"{self.pick(['MY', 'TARGET'])}.{self.pick(MISSING)}"
        if c == 3:
            return self.attr("odd")
        if c == 4 and depth < self.max_depth:
            return self.random_call(depth)
        if c == 5:
            return self.pick(["parent.Memory", "self.Memory", "MY.Memory", "TARGET.Memory",
                              "MY.TARGET", "TARGET.MY.Memory"])
        if c == 6:
            return "CurrentTime > 1700000000"
        if c == 7 and depth < self.max_depth:
            # Selection from a record, or from a list literal (which selects in every item). A list
            # made by a function is never the base: classad2 crashes on that (see
            # test_known_differences.py).
            base = self.g_record(depth + 1, self.chance(0.5)) if self.chance(0.7) else self.pick(
                ["{ [ a = 1 ], [ a = 2; x = 3 ], 4 }", "Mixed", "{ }"])
            return f"{self.paren(base, 1.0)}.{self.pick(['a', 'x', 'Memory', 'nope'])}"
        return self.pick(["Mixed[4]", "Mixed[5]", "Nested.d.f", "Inner.z", "TARGET.Inner.y",
                          "Nested.zz", "EmptyList[0]", "Slots[-1]", "Slots[4]"])

    def control(self, ty: str, depth: int) -> str:
        """Conditional, elvis, ifThenElse or eval producing ``ty``."""
        c = self.r.randrange(4)
        if c == 0:
            return self.paren(f"{self.paren(self.sub('bool', depth))} ? {self.sub(ty, depth)} : {self.paren(self.sub(ty, depth))}")
        if c == 1:
            left = self.sub(self.pick([ty, "odd"]), depth)
            return self.paren(f"{self.paren(left)} ?: {self.paren(self.sub(ty, depth))}")
        if c == 2:
            return f"ifThenElse({self.sub('bool', depth)}, {self.sub(ty, depth)}, {self.sub(ty, depth)})"
        return f"eval({self.pick(EVAL_ARGS)})" if ty in ("int", "any") else self.paren(
            f"{self.paren(self.sub('bool', depth))} ? {self.sub(ty, depth)} : {self.paren(self.sub(ty, depth))}")

    def random_call(self, depth: int) -> str:
        """Any function, any number of arguments of any types: mostly error paths."""
        name = self.pick(FUNCTIONS)
        if self.chance(0.2):
            name = self.pick([name.lower(), name.upper()])
        n = self.r.choice([0, 1, 1, 2, 2, 3, 4])
        args = ", ".join(self.sub("any", depth) for _ in range(n))
        return f"{name}({args})"

    # ------------------------------------------------------------------ typed productions
    def g_int(self, depth: int, leaf: bool) -> str:
        if leaf:
            c = self.r.random()
            if c < 0.45:
                lit = self.pick(INT_LITS)
                return f"-{lit}" if self.chance(0.15) else lit
            if c < 0.9:
                return self.attr("int")
            return self.pick(["Slots[0]", "Slots[3]", "Nested.a", "Nested.d.e", "Nested.g",
                              "TARGET.Inner.x", "Inner.x", "size(Slots)", "Mixed[0]"])
        c = self.r.randrange(22)
        s = lambda t="int": self.sub(t, depth)  # noqa: E731
        if c < 6:
            return self.paren(f"{self.paren(s())}{self.ws()}{self.pick(ARITH_OPS)} {self.paren(s())}")
        if c == 6:
            return self.paren(f"{self.pick(['-', '+', '~', '- '])}{self.paren(s(), 0.8)}")
        if c == 7:
            return self.paren(f"{self.paren(s())} {self.pick(BIT_OPS)} {self.paren(s())}")
        if c == 8:
            return f"{self.pick(['int', 'INT'])}({s(self.pick(['real', 'string', 'int', 'bool']))})"
        if c == 9:
            return f"{self.pick(['floor', 'ceiling', 'ceil', 'round'])}({s(self.pick(['real', 'int']))})"
        if c == 10:
            return f"size({s(self.pick(['list', 'string', 'record']))})"
        if c == 11:
            return f"{self.pick(['sum', 'min', 'max'])}({self.int_list(depth)})"
        if c == 12:
            return f"{self.pick(['strcmp', 'stricmp', 'versioncmp'])}({s('string')}, {s('string')})"
        if c == 13:
            return f"{self.pick(['getYear', 'getMonth', 'getDayOfYear', 'getDayOfMonth', 'getDayOfWeek', 'getHours', 'getMinutes', 'getSeconds'])}({s('abstime')})"
        if c == 14:
            return f"{self.pick(['getDays', 'getHours', 'getMinutes', 'getSeconds'])}({s('reltime')})"
        if c == 15:
            return f"{self.paren(self.int_list(depth), 1.0 if self.chance(0.5) else 0.0)}[{s()}]"
        if c == 16:
            return f"stringListSize({s('string')}{self.opt_delims()})"
        if c == 17:
            return f"{self.pick(['stringListSum', 'stringListMin', 'stringListMax'])}({self.pick(STRLIST_INTS)}{self.opt_delims()})"
        if c == 18:
            return f"pow({s()}, {self.pick(['0', '1', '2', '3', '-1', '62', '63', '64'])})"
        if c == 19:
            return f"quantize({s()}, {self.pick(['4', '10', '1024', '0', '-3', '{ 128, 256, 512 }'])})"
        if c == 20:
            return self.paren(f"{self.paren(s())} * {self.paren(s())} - {self.paren(s())}", 0.5)
        return f"{self.paren(self.rec_lit(depth, {'a': 'int'}), 1.0)}.a"

    def int_list(self, depth: int) -> str:
        if self.chance(0.4):
            return self.pick(["Slots", "MY.Slots", "EmptyList", "Reals", "Weights", "Mixed"])
        n = self.r.randrange(0, 5)
        return "{ " + ", ".join(self.sub(self.pick(["int", "int", "int", "real"]), depth) for _ in range(n)) + " }"

    def opt_delims(self) -> str:
        return self.pick(["", "", "", ', ","', ', ", "', ', ";"', ', ""'])

    def g_real(self, depth: int, leaf: bool) -> str:
        if leaf:
            c = self.r.random()
            if c < 0.5:
                lit = self.pick(REAL_LITS)
                return f"-{lit}" if self.chance(0.15) else lit
            if c < 0.9:
                return self.attr("real")
            return self.pick(['real("nan")', 'real("inf")', 'real("-inf")', "Reals[1]", "Weights[2]",
                              "Mixed[2]", 'real("1e400")', 'real("-0.0")'])
        c = self.r.randrange(12)
        s = lambda t="real": self.sub(t, depth)  # noqa: E731
        if c < 4:
            a, b = self.pick([("real", "real"), ("real", "int"), ("int", "real")])
            return self.paren(f"{self.paren(s(a))}{self.ws()}{self.pick(ARITH_OPS)} {self.paren(s(b))}")
        if c == 4:
            return self.paren(f"-{self.paren(s(), 0.8)}")
        if c == 5:
            return f"real({s(self.pick(['int', 'string', 'real', 'bool']))})"
        if c == 6:
            return f"avg({self.int_list(depth)})"
        if c == 7:
            return f"pow({s(self.pick(['real', 'int']))}, {s(self.pick(['real', 'int']))})"
        if c == 8:
            return f"stringListAvg({self.pick(STRLIST_REALS)}{self.opt_delims()})"
        if c == 9:
            return f"{self.pick(['min', 'max', 'sum'])}({self.pick(['Reals', 'Weights', '{ 1, 2.5 }', '{ 0.5 }'])})"
        if c == 10:
            return f"quantize({s()}, {self.pick(QUANTUM_REALS)})"
        return self.paren(f"{self.paren(s('int'))} / {self.pick(['2.0', '3.0', '0.0', '-0.0', '7'])}")

    def g_bool(self, depth: int, leaf: bool) -> str:
        if leaf:
            if self.chance(0.5):
                return self.kw(self.pick(["true", "false"]))
            return self.attr("bool")
        c = self.r.randrange(20)
        s = lambda t="bool": self.sub(t, depth)  # noqa: E731
        if c < 4:
            t = self.pick(["int", "real", "string", "int", "string", "abstime", "reltime", "bool"])
            t2 = t if self.chance(0.8) else self.pick(TYPES)
            return self.paren(f"{self.paren(s(t))}{self.ws()}{self.pick(CMP_OPS)} {self.paren(s(t2))}")
        if c < 6:
            t = self.pick(TYPES + ["odd"])
            t2 = t if self.chance(0.6) else self.pick(TYPES + ["odd"])
            return self.paren(f"{self.paren(s(t))} {self.pick(META_OPS)} {self.paren(s(t2))}")
        if c < 9:
            return self.paren(f"{self.paren(s(), 0.6)}{self.ws()}{self.pick(['&&', '||'])} {self.paren(s(), 0.6)}")
        if c == 9:
            return self.paren(f"!{self.paren(s(), 0.8)}")
        if c == 10:
            fn = self.pick(FUNCTIONS[:10])
            return f"{fn}({s(self.pick(TYPES + ['odd']))})"
        if c == 11:
            t = self.pick(["int", "string", "real"])
            return f"{self.pick(['member', 'identicalMember'])}({s(t)}, {self.pick(MEMBER_LISTS)})"
        if c == 12:
            opts = f", {self.pick(REGEX_OPTS)}" if self.chance(0.4) else ""
            return f"regexp({self.pick(REGEX_LITS)}, {s('string')}{opts})"
        if c == 13:
            fn = self.pick(["stringListMember", "stringListIMember"])
            return f"{fn}({s('string')}, {self.pick(STRLISTS)}{self.opt_delims()})"
        if c == 14:
            fn = self.pick(["versionLE", "versionLT", "versionGE", "versionGT", "versionEQ"])
            return f"{fn}({s('string')}, {self.pick(VERSIONS)})"
        if c == 15:
            op = self.pick(['"<"', '"=="', '">="', '"!="', '"is"', '"isnt"', '"=?="', '"bogus"'])
            return f"{self.pick(['anyCompare', 'allCompare'])}({op}, {self.int_list(depth)}, {s(self.pick(['int', 'real']))})"
        if c == 16:
            fn = self.pick(["stringListsIntersect", "stringListSubsetMatch", "stringListISubsetMatch"])
            return f"{fn}({s('string')}, {s('string')}{self.opt_delims()})"
        if c == 17:
            return f"bool({s(self.pick(['int', 'real', 'string']))})"
        if c == 18:
            return f"version_in_range({s('string')}, {self.pick(RANGE_LOW)}, {self.pick(RANGE_HIGH)})"
        opts = f", {self.pick(REGEX_OPTS)}" if self.chance(0.4) else ""
        return f"{self.pick(['regexpMember', 'stringList_regexpMember'])}({self.pick(REGEX_LITS)}, {self.pick(REGEX_LISTS)}{opts})"

    def g_string(self, depth: int, leaf: bool) -> str:
        if leaf:
            if self.chance(0.5):
                return self.pick(STRING_LITS)
            if self.chance(0.85):
                return self.attr("string")
            return self.pick(["Names[1]", "Tags[0]", "Nested.b", "Mixed[1]", "Inner.z", "TARGET.Inner.z"])
        c = self.r.randrange(16)
        s = lambda t="string": self.sub(t, depth)  # noqa: E731
        if c < 3:
            n = self.r.randrange(0, 4)
            return f"strcat({', '.join(s(self.pick(['string', 'string', 'int', 'real', 'bool'])) for _ in range(n))})"
        if c == 3:
            return f"{self.pick(['toUpper', 'toLower', 'TOUPPER', 'tolower'])}({s()})"
        if c == 4:
            extra = f", {s('int')}" if self.chance(0.5) else ""
            return f"substr({s()}, {s('int')}{extra})"
        if c == 5:
            return f"string({s(self.pick(['int', 'real', 'bool', 'string', 'list', 'abstime', 'reltime', 'record']))})"
        if c == 6:
            return f"join({self.pick(JOIN_SEPS)}, {self.pick(JOIN_LISTS)})"
        if c == 7:
            fn = self.pick(["replace", "replaceAll", "regexps"])
            opts = f", {self.pick(REGEX_OPTS)}" if self.chance(0.3) else ""
            return f"{fn}({self.pick(REGEX_LITS)}, {s()}, {self.pick(REPLACEMENTS)}{opts})"
        if c == 8:
            fmt = f", {self.pick(TIME_FORMATS)}" if self.chance(0.85) else ""
            return f"formatTime({s(self.pick(['abstime', 'int']))}{fmt})"
        if c == 9:
            return f"unparse({self.attr(self.pick(['int', 'string', 'bool', 'real']))})"
        if c == 10:
            return f"interval({s(self.pick(['int', 'int', 'real']))})"
        if c == 11:
            return f"{self.pick(['splitUserName', 'splitSlotName'])}({s()})[{self.pick(['0', '1'])}]"
        if c == 12:
            return f"envV1ToV2({self.pick(ENV_V1)})"
        if c == 13:
            return f"listToArgs({self.pick(ARG_LISTS)})"
        if c == 14:
            return f"join({self.pick(JOIN_SEPS2)}, {s()}, {s()})"
        return f"{self.paren(self.str_list(depth), 1.0)}[{self.pick(['0', '1', '2'])}]"

    def str_list(self, depth: int) -> str:
        if self.chance(0.4):
            return self.pick(["Names", "Tags", "TARGET.Tags", 'split("a b  c")', 'split("a,b;c", ",;")',
                              "argsToList(Arguments)", 'split(Groups, ",")'])
        n = self.r.randrange(0, 4)
        return "{ " + ", ".join(self.sub("string", depth) for _ in range(n)) + " }"

    def g_list(self, depth: int, leaf: bool) -> str:
        if leaf:
            return self.attr("list") if self.chance(0.7) else self.pick(["{ }", "{ 1 }", '{ "a", "b" }'])
        c = self.r.randrange(6)
        if c < 3:
            n = self.r.randrange(0, 4)
            return "{ " + ", ".join(self.sub(self.pick(TYPES + ["odd"]), depth) for _ in range(n)) + " }"
        if c == 3:
            return self.str_list(depth)
        if c == 4:
            return f"{self.pick(['split', 'splitUserName', 'splitSlotName', 'argsToList'])}({self.sub('string', depth)})"
        return f"{self.paren(self.rec_lit(depth, {'l': 'list'}), 1.0)}.l"

    def rec_lit(self, depth: int, fixed: dict[str, str] | None = None) -> str:
        """A record literal; may refer to its own attributes and to the enclosing scopes."""
        attrs = dict(fixed or {})
        for _ in range(self.r.randrange(0, 3)):
            attrs[self.pick(["a", "b", "x", "Memory", "y"])] = self.pick(TYPES[:5] + ["inner"])
        parts = []
        for name, ty in attrs.items():
            if ty == "inner":
                val = self.pick(["a", "x + 1", "Memory", "parent.Memory", "self.x", "MY.Memory",
                                 "TARGET.Owner", "y", "toplevel.Memory", "root.Memory", "Owner"])
            else:
                val = self.sub(ty, depth)
            parts.append(f"{name} = {val}")
        return "[ " + "; ".join(parts) + " ]"

    def g_record(self, depth: int, leaf: bool) -> str:
        if leaf:
            return self.attr("record") if self.chance(0.7) else self.pick(["[ ]", "[ a = 1 ]", "Nested.d"])
        if self.chance(0.15):
            return f"splitTime({self.sub(self.pick(['abstime', 'reltime', 'int']), depth)})"
        return self.rec_lit(depth)

    def g_abstime(self, depth: int, leaf: bool) -> str:
        if leaf:
            if self.chance(0.5):
                return self.attr("abstime")
            return f"absTime({self.pick(ABSTIME_STRS + ['0', '1700000000', '86400', '-1'])})"
        c = self.r.randrange(4)
        if c == 0:
            return f"absTime({self.sub('int', depth)})"
        if c == 1:
            return self.paren(f"{self.paren(self.sub('abstime', depth))} {self.pick(['+', '-'])} {self.paren(self.sub('reltime', depth))}")
        if c == 2:
            return f"absTime({self.sub('int', depth)}, {self.pick(['0', '3600', '-18000'])})"
        return self.paren(f"{self.paren(self.sub('reltime', depth))} + {self.paren(self.sub('abstime', depth))}")

    def g_reltime(self, depth: int, leaf: bool) -> str:
        if leaf:
            if self.chance(0.5):
                return self.attr("reltime")
            return f"relTime({self.pick(RELTIME_STRS + ['0', '3600', '-90', '1.5'])})"
        c = self.r.randrange(5)
        if c == 0:
            return f"relTime({self.sub(self.pick(['int', 'real']), depth)})"
        if c == 1:
            return self.paren(f"{self.paren(self.sub('abstime', depth))} - {self.paren(self.sub('abstime', depth))}")
        if c == 2:
            return self.paren(f"{self.paren(self.sub('reltime', depth))} {self.pick(['+', '-'])} {self.paren(self.sub('reltime', depth))}")
        if c == 3:
            return self.paren(f"{self.paren(self.sub('reltime', depth))} {self.pick(['*', '/'])} {self.paren(self.sub(self.pick(['int', 'real']), depth))}")
        return self.paren(f"-{self.paren(self.sub('reltime', depth), 1.0)}")


def generate(seed: int, n: int, top: Callable[[ExprGen], str] | None = None) -> list[str]:
    """``n`` expressions from ``seed``; the same seed always gives the same list."""
    g = ExprGen(seed)
    make = top or (lambda gen: gen.expr("any"))
    return [make(g) for _ in range(n)]
