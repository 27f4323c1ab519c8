#!/usr/bin/env python3
"""Fails when a function outside tests is longer than 120 lines.

Long functions are where a newcomer gets lost; the limit holds for every
crate's sources (`crates/*/src`, test modules and `testing` helpers
excluded). Functions still over the limit are listed in ALLOWED with their
length today: the list may only shrink, and a listed function that grows is
an error too.
"""
import os
import re
import sys

LIMIT = 120

# file:function -> lines today, for a function that cannot be split yet;
# remove its entry when it is. Empty: every function is within the limit.
ALLOWED = {}


def functions(roots):
    res = []
    for root in roots:
      for dp,dn,fn in os.walk(root):
        for f in fn:
          if not f.endswith('.rs'): continue
          p=os.path.join(dp,f)
          src=open(p,encoding='utf-8').read()
          lines=src.split('\n')
          # strip strings and comments crudely per char
          i=0;n=len(src);out=[]
          while i<n:
            c=src[i]
            if src.startswith('//',i):
              j=src.find('\n',i); j=n if j<0 else j; out.append(' '*(j-i)); i=j; continue
            if src.startswith('/*',i):
              j=src.find('*/',i+2); j=n if j<0 else j+2; out.append(''.join(ch if ch=='\n' else ' ' for ch in src[i:j])); i=j; continue
            m=re.match(r'r(#*)"',src[i:i+10])
            if m and (i==0 or not (src[i-1].isalnum() or src[i-1]=='_')):
              close='"'+m.group(1); j=src.find(close,i+len(m.group(0))); j=n if j<0 else j+len(close)
              out.append(''.join(ch if ch=='\n' else ' ' for ch in src[i:j])); i=j; continue
            if c=='"':
              j=i+1
              while j<n and src[j]!='"':
                j+= 2 if src[j]=='\\' else 1
              j+=1; out.append(''.join(ch if ch=='\n' else ' ' for ch in src[i:j])); i=j; continue
            if c=="'" :
              m=re.match(r"'(\\.|[^\\'])'",src[i:i+4]) or re.match(r"'\\u\{[0-9a-fA-F]+\}'",src[i:i+12]) or re.match(r"'\\x..'",src[i:i+6])
              if m: out.append(' '*len(m.group(0))); i+=len(m.group(0)); continue
            out.append(c); i+=1
          s=''.join(out)
          for m in re.finditer(r'\bfn\s+(\w+)',s):
            # find first '{' or ';' after
            k=m.end(); depth=0
            while k<len(s) and s[k] not in '{;': 
              k+=1
            if k>=len(s) or s[k]==';': continue
            start=k; depth=0
            while k<len(s):
              if s[k]=='{': depth+=1
              elif s[k]=='}':
                depth-=1
                if depth==0: break
              k+=1
            l1=s.count('\n',0,m.start())+1; l2=s.count('\n',0,k)+1
            res.append((l2-l1+1,p,l1,m.group(1)))
    return res


def in_test_module(path, text, line):
    """True when `line` of `path` is inside a `#[cfg(test)]` module."""
    before = text.split("\n")[:line]
    for i in range(len(before) - 1, -1, -1):
        if before[i].strip() == "#[cfg(test)]":
            return True
    return False


def self_test():
    """The check finds a long function and passes a short one (so it cannot pass silently)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "crates", "demo", "src")
        os.makedirs(src)
        body = "\n".join(f"    let x{i} = \"{{}}\"; // }}" for i in range(130))
        with open(os.path.join(src, "lib.rs"), "w") as f:
            f.write(f"fn long() {{\n{body}\n}}\n\nfn short() {{\n    let _ = 1;\n}}\n")
        found = {name: length for length, _, _, name in functions([src])}
        assert found.get("long", 0) > LIMIT, found
        assert found.get("short", LIMIT) < 5, found
    print("check-function-length self-test: ok")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    crates = os.path.join(root, "crates")
    roots = [os.path.join(crates, c, "src") for c in sorted(os.listdir(crates))]
    problems = []
    for length, path, line, name in functions([r for r in roots if os.path.isdir(r)]):
        rel = os.path.relpath(path, root)
        if "/testing" in rel or rel.endswith("/tests.rs"):
            continue
        text = open(path, encoding="utf-8").read()
        if in_test_module(path, text, line):
            continue
        key = f"{rel}:{name}"
        allowed = ALLOWED.get(key)
        if length > LIMIT and (allowed is None or length > allowed):
            problems.append(f"{rel}:{line}: fn {name} is {length} lines (limit {LIMIT}): split it along its sub-jobs")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
