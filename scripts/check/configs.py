#!/usr/bin/env python3
"""One config style across the published crates: every `pub struct …Config` is
`#[non_exhaustive]` (a field added later breaks no one), and every public field is set by its
`new` or by a `#[must_use]` setter of the same name (so that a config is written as one chain,
`RabbitConfig::new(url, queue).prefetch(64)`, and no field needs the struct's literal). Fails
naming each config and field that breaks the rule."""
import pathlib, re, sys

root = pathlib.Path(__file__).resolve().parents[2]
unpublished = {"inboxed-test", "inboxed-bench", "inboxed-docs"}
problems = []

def block_end(s, start):
    depth = 0
    for k in range(start, len(s)):
        if s[k] == "{":
            depth += 1
        elif s[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    raise ValueError("unbalanced braces")

for path in sorted((root / "crates").glob("*/src/**/*.rs")):
    if path.relative_to(root / "crates").parts[0] in unpublished:
        continue
    s = path.read_text()
    for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)pub struct (\w+Config)\s*\{", s):
        attrs, name = m.groups()
        body = s[m.end() - 1:block_end(s, m.end() - 1)]
        where = f"{path.relative_to(root)}: {name}"
        if "non_exhaustive" not in attrs:
            problems.append(f"{where} is not #[non_exhaustive]")
        # The type's own inherent impl blocks, and nothing else of the file.
        impls = "".join(
            s[i.end():block_end(s, i.end() - 1)]
            for i in re.finditer(r"\nimpl " + name + r" \{", s)
        )
        setters = set(re.findall(r"#\[must_use\]\s*pub (?:const )?fn (\w+)\(\s*mut self", impls))
        new = re.search(r"pub fn new\(([^)]*)\)", impls)
        params = set(re.findall(r"(\w+):", new.group(1))) if new else set()
        for field in re.findall(r"\n    pub (\w+):", body):
            if field not in setters and field not in params:
                problems.append(f"{where}::{field} has no #[must_use] setter of its name")

for p in problems:
    print(f"configs.py: {p}")
sys.exit(1 if problems else 0)
