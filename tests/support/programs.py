"""Program problems and solutions for the judge's tests: a sum problem with a public and a
private test, and the programs of every shape (right, wrong, hostile) in Python and C++."""

from __future__ import annotations

from tracegen.schema import Problem, ProgramLimits, TestCase

SUM = Problem(
    id="sum",
    prompt="Read two integers a and b; print a + b.",
    limits=ProgramLimits(time_s=1, memory_mb=64),
    tests=[
        TestCase(name="public", kind="stdio", input="2 3\n", expected="5\n"),
        TestCase(name="private", kind="stdio", input="10 20\n", expected="30\n", private=True),
    ],
)

PYTHON = {
    "accepted": "a, b = map(int, input().split())\nprint(a + b)\n",
    "whitespace": "import sys\na, b = map(int, sys.stdin.read().split())\n"
    "sys.stdout.write('  %d \\r\\n\\n\\n' % (a + b))\n",
    "hard-coded": "print(5)\n",
    "wrong": "a, b = map(int, input().split())\nprint(a - b)\n",
    "truncated": "a, b = map(int, input().split())\nprint(str(a + b)[:-1])\n",
    "extra": "a, b = map(int, input().split())\nprint(a + b)\nprint(0)\n",
    "exit-call": "a, b = map(int, input().split())\nprint(a + b)\nexit()\nprint('never')\n",
    "recursion": "import sys\nsys.setrecursionlimit(10**6)\n"
    "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\n"
    "a, b = map(int, input().split())\nprint(f(50000) - 50000 + a + b)\n",
    "busy": "while True:\n    pass\n",
    "sleep": "import time\ntime.sleep(60)\n",
    "memory": "x = bytearray(400 << 20)\nprint(len(x))\n",
    "crash": "raise ValueError('boom')\n",
    "exit": "import sys\nsys.exit(3)\n",
    "segfault": "import ctypes\nctypes.string_at(0)\n",
    "outside": "print(open('/etc/shadow').read())\n",
    "syntax": "def f(:\n    pass\n",
    "flood": "while True:\n    print('y' * 1000)\n",
    # Too slow, and answers from the handler of the signal that stops it.
    "answer-when-killed": "import os, signal\na, b = map(int, input().split())\n"
    "def answer(*_):\n    os.write(1, b'%d\\n' % (a + b))\n    os._exit(0)\n"
    "for s in (signal.SIGXCPU, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
    "    signal.signal(s, answer)\nwhile True:\n    pass\n",
}
"""Python programs for `SUM`, by what they do."""

CPP = {
    "accepted": '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);'
    'printf("%lld\\n",a+b);}\n',
    "iostream": "#include <bits/stdc++.h>\nusing namespace std;\n"
    "int main(){ios::sync_with_stdio(false);long long a,b;cin>>a>>b;cout<<a+b<<'\\n';}\n",
    "hard-coded": '#include <cstdio>\nint main(){puts("5");}\n',
    "wrong": '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);'
    'printf("%lld\\n",a-b);}\n',
    "busy": "int main(){ volatile unsigned long x = 0; for(;;) x++; }\n",
    "memory": "#include <vector>\n#include <cstdio>\nint main(){std::vector<char> v(400u<<20, 1);"
    'printf("%d\\n", v[12345]);}\n',
    "segfault": "int main(){ volatile int *p = 0; *p = 1; return 0; }\n",
    "crash": "#include <cstdlib>\nint main(){ abort(); }\n",
    "exit": "int main(){ return 3; }\n",
    "outside": '#include <cstdio>\nint main(){FILE*f=fopen("/etc/shadow","r");'
    "if(!f) return 1; int c; while((c=fgetc(f))!=EOF) putchar(c); }\n",
    "compile": "int main(){ return x; }\n",
    "answer-when-killed": "#include <csignal>\n#include <cstdio>\n#include <unistd.h>\n"
    "static char s[32]; static int n;\nstatic void on(int){ write(1, s, n); _exit(0); }\n"
    'int main(){ long long a,b; scanf("%lld %lld",&a,&b); n=snprintf(s,32,"%lld\\n",a+b);'
    " signal(SIGXCPU,on); signal(SIGTERM,on); volatile unsigned long x=0; for(;;) x++; }\n",
}
"""C++ programs for `SUM`, by what they do."""


def _java(body: str) -> str:
    return f"public class Main {{\n{body}\n}}\n"


_MAIN = "public static void main(String[] args)"
_READ = "var s = new java.util.Scanner(System.in); long a = s.nextLong(), b = s.nextLong();"
JAVA = {
    "accepted": _java(f"{_MAIN} {{ {_READ} System.out.println(a + b); }}"),
    "fast-io": "import java.io.*;\nimport java.util.*;\n\nclass Main {\n"
    "  static class Reader {\n"
    "    BufferedReader r = new BufferedReader(new InputStreamReader(System.in));\n"
    "    StringTokenizer t;\n"
    "    String next() throws IOException {\n"
    "      while (t == null || !t.hasMoreTokens()) t = new StringTokenizer(r.readLine());\n"
    "      return t.nextToken();\n    }\n  }\n"
    f"  {_MAIN} throws IOException {{\n    Reader in = new Reader();\n"
    "    PrintWriter out = new PrintWriter(new BufferedOutputStream(System.out));\n"
    "    out.println(Long.parseLong(in.next()) + Long.parseLong(in.next()));\n"
    "    out.flush();\n  }\n}\n",
    "named": "import java.util.*;\npublic final class Solution {\n"
    f'  {_MAIN} {{ {_READ} System.out.printf("%d%n", a + b); }}\n}}\n',
    "package": "package contest.sum;\nimport java.math.BigInteger;\n"
    "class Helper {\n  static String add(String x, String y) {\n"
    "    return new BigInteger(x).add(new BigInteger(y)).toString();\n  }\n}\n"
    f"public class Main {{\n  {_MAIN} {{\n    var s = new java.util.Scanner(System.in);\n"
    "    System.out.println(Helper.add(s.next(), s.next()));\n  }\n}\n",
    "threads": _java(
        f"{_MAIN} throws Exception {{ long[] r = new long[1];\n"
        f'  Thread t = new Thread(null, () -> {{ {_READ} r[0] = a + b; }}, "deep", 1 << 26);\n'
        "  t.start(); t.join(); System.out.println(r[0]); }"
    ),
    "hard-coded": _java(f"{_MAIN} {{ System.out.println(5); }}"),
    "wrong": _java(f"{_MAIN} {{ {_READ} System.out.println(a - b); }}"),
    "busy": _java(f"{_MAIN} {{ long x = 0; while (true) x++; }}"),
    "memory": _java(
        f"{_MAIN} {{ var l = new java.util.ArrayList<long[]>();\n"
        "  while (true) l.add(new long[1 << 20]); }"
    ),
    "crash": _java(f"{_MAIN} {{ int[] x = new int[1]; System.out.println(x[5]); }}"),
    "exit": _java(f"{_MAIN} {{ System.exit(3); }}"),
    "stack": _java(f"static int f(int n) {{ return f(n + 1) + 1; }}\n{_MAIN} {{ f(0); }}"),
    "outside": _java(
        f"{_MAIN} throws Exception {{\n"
        '  var shadow = java.nio.file.Path.of("/etc/shadow");\n'
        "  System.out.print(new String(java.nio.file.Files.readAllBytes(shadow))); }"
    ),
    "compile": _java(f"{_MAIN} {{ int x = ; }}"),
    "no-main": _java("static int f() { return 1; }"),
}
"""Java programs for `SUM`, by what they do."""

OUTCOMES = {
    "accepted": "accepted",
    "iostream": "accepted",
    "whitespace": "accepted",
    "exit-call": "accepted",
    "recursion": "accepted",
    "hard-coded": "wrong",
    "wrong": "wrong",
    "truncated": "wrong",
    "extra": "wrong",
    "busy": "time",
    "sleep": "time",
    "memory": "memory",
    "crash": "runtime",
    "exit": "runtime",
    "segfault": "runtime",
    "outside": "runtime",
    "syntax": "compile",
    "compile": "compile",
    "fast-io": "accepted",
    "named": "accepted",
    "package": "accepted",
    "threads": "accepted",
    "stack": "runtime",
    "no-main": "compile",
    "flood": "output-limit",
    "answer-when-killed": "time",
}
"""The outcome each program must get."""
