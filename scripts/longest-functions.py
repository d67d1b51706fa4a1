#!/usr/bin/env python3
"""The longest non-test Rust functions (lines from the `fn` line to its closing brace),
`#[cfg(test)]` items and tests/ and benches/ left out: the bar of issue 26.
Usage: scripts/longest-functions.py N $(find crates -path '*/src/*.rs')"""
import re, sys

def blank(src):
    """Replace comments, strings and char literals by spaces (keeping newlines)."""
    out = []; i = 0; n = len(src)
    def keep_nl(s): return ''.join(c if c == '\n' else ' ' for c in s)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i); j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif src.startswith('/*', i):
            depth = 0; j = i
            while j < n:
                if src.startswith('/*', j): depth += 1; j += 2
                elif src.startswith('*/', j):
                    depth -= 1; j += 2
                    if depth == 0: break
                else: j += 1
            out.append(keep_nl(src[i:j])); i = j
        elif re.match(r'b?r#*"', src[i:i+40]) and (i == 0 or not (src[i-1].isalnum() or src[i-1] == '_')):
            m = re.match(r'b?r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + m.end()); j = n if j < 0 else j + len(end)
            out.append(keep_nl(src[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            j += 1
            out.append(keep_nl(src[i:j])); i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^'\\])'", src[i:])
            if m:
                out.append(' ' * m.end()); i += m.end()
            else:
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return ''.join(out)

def fns(path):
    src = open(path).read()
    b = blank(src)
    lines = b.split('\n')
    # find matching braces
    match = {}; stack = []
    for k, ch in enumerate(b):
        if ch == '{': stack.append(k)
        elif ch == '}' and stack: match[stack.pop()] = k
    def line_of(k): return b.count('\n', 0, k) + 1
    # cfg(test) ranges
    skip = []
    for m in re.finditer(r'#\[cfg\(test\)\]', b):
        k = b.find('{', m.end()); semi = b.find(';', m.end())
        if k >= 0 and (semi < 0 or k < semi) and k in match:
            skip.append((m.start(), match[k]))
    for m in re.finditer(r'\bfn\s+([A-Za-z_][A-Za-z0-9_]*)', b):
        if any(s <= m.start() <= e for s, e in skip): continue
        # body: first '{' at paren depth 0 after the signature, before any ';'
        k = m.end(); depth = 0
        while k < len(b):
            ch = b[k]
            if ch in '(<[': depth += 1
            elif ch in ')>]': depth -= 1
            elif ch == ';' and depth <= 0: k = -1; break
            elif ch == '{' and depth <= 0: break
            k += 1
        if k < 0 or k >= len(b) or k not in match: continue
        # '->' contains '>' which we counted; tolerate by only caring about ';'/'{' at depth<=0
        yield m.group(1), line_of(m.start()), line_of(match[k]) - line_of(m.start()) + 1

res = []
for p in sys.argv[2:]:
    if re.search(r'/(tests|benches)/', p): continue
    for name, ln, length in fns(p):
        res.append((length, name, f'{p}:{ln}'))
res.sort(reverse=True)
for length, name, where in res[:int(sys.argv[1])]:
    print(f'{length:5d}  {name:28s} {where}')
