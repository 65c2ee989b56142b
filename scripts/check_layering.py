#!/usr/bin/env python3
"""The layering check: derives the module graph from the #includes and compares it with the table.

    scripts/check_layering.py [--root DIR]          check (exit 1 with every offending line)
    scripts/check_layering.py --markdown            print the graph as the docs' "may include" cells

A module is a folder of src/ (or `tessera`, the public headers in include/tessera). An arrow
A -> B exists when a file under A's folder has `#include "B/..."` with B another module. The
check fails on:
  - an arrow that src/layers.txt does not list (file:line of each include that makes it);
  - an arrow src/layers.txt lists that no include makes (the table stays the graph);
  - a module folder missing from the table, or a table line with no folder;
  - a row of docs/architecture.md's module table whose "may include" cell differs from the table,
    or a row for a module the table does not have;
  - README.md's floor diagram (between the `layers:begin` / `layers:end` markers) that is not the
    one this table gives (`--readme` prints it: each module on the floor one above its highest
    dependency, `tessera` on floor 0).
Tests and benchmarks may include any module (they test the internals); they are not scanned.
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[^"]*"')
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".inc"}


def read_table(path):
    """src/layers.txt -> {module: set(deps)} in file order."""
    table = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            sys.exit(f"{path}:{lineno}: expected 'module: deps...', got '{raw}'")
        name, deps = line.split(":", 1)
        table[name.strip()] = set(deps.split())
    return table


def module_dirs(root, table):
    dirs = {m: root / "src" / m for m in table if m != "tessera"}
    dirs["tessera"] = root / "include" / "tessera"
    return dirs


def derive_graph(root, table):
    """{module: {dep: [(file, line), ...]}} from every #include under each module's folder."""
    graph = {}
    for module, folder in module_dirs(root, table).items():
        arrows = graph.setdefault(module, {})
        if not folder.is_dir():
            continue
        for f in sorted(folder.rglob("*")):
            if f.suffix not in SOURCE_SUFFIXES or not f.is_file():
                continue
            for lineno, text in enumerate(f.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(text)
                if m and m.group(1) in table and m.group(1) != module:
                    arrows.setdefault(m.group(1), []).append((f.relative_to(root), lineno))
    return graph


def docs_cells(docs):
    """docs/architecture.md module rows: {module: set(deps)} from the last cell of each row."""
    cells = {}
    row = re.compile(r"^\|\s*`(?:include/)?([a-z_]+)/?`\s*\|.*\|\s*([^|]*?)\s*\|\s*$")
    for text in docs.read_text().splitlines():
        m = row.match(text)
        if not m:
            continue
        cell = m.group(2)
        deps = set() if cell in ("", "nothing else", "-", "–") else {d.strip(" `") for d in cell.split(",")}
        cells[m.group(1)] = deps
    return cells


def floors(table):
    """{module: floor}: 0 for a module with no dependency, else one above its highest dependency."""
    floor = {}

    def of(module, seen=()):
        if module in floor:
            return floor[module]
        if module in seen:
            sys.exit(f"src/layers.txt: a circle through {' -> '.join(seen + (module,))}")
        deps = [d for d in table.get(module, ()) if d in table]
        floor[module] = 1 + max((of(d, seen + (module,)) for d in deps), default=-1)
        return floor[module]

    for m in table:
        of(m)
    return floor


def readme_diagram(table):
    """The README's floor diagram: one line per floor, highest first, modules in table order."""
    floor = floors(table)
    lines = []
    for f in range(max(floor.values()), -1, -1):
        names = [m for m in table if floor[m] == f]
        lines.append(f"floor {f}: " + "  ".join(names))
    return "\n".join(lines)


README_BLOCK = re.compile(r"<!-- layers:begin -->\n```\n(.*?)```\n<!-- layers:end -->", re.S)


def markdown(table):
    return "\n".join(f"{m}: {', '.join(sorted(d)) if d else 'nothing else'}" for m, d in table.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    ap.add_argument("--markdown", action="store_true", help="print the derived graph, one module a line")
    ap.add_argument("--readme", action="store_true", help="print README.md's floor diagram for the table")
    args = ap.parse_args()
    root = args.root.resolve()
    table = read_table(root / "src" / "layers.txt")
    graph = derive_graph(root, table)

    if args.markdown:
        print(markdown({m: set(graph[m]) for m in table}))
        return 0
    if args.readme:
        print(readme_diagram(table))
        return 0

    errors = []
    src_folders = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    for folder in sorted(src_folders - set(table)):
        errors.append(f"src/{folder}/ is not in src/layers.txt: add its line (what it may include)")
    for module, folder in module_dirs(root, table).items():
        if not folder.is_dir():
            errors.append(f"src/layers.txt lists '{module}' but {folder.relative_to(root)}/ does not exist")
    for module, deps in table.items():
        for dep in sorted(deps - set(table)):
            errors.append(f"src/layers.txt: {module} -> {dep}: '{dep}' is not a module")
        for dep, sites in sorted(graph[module].items()):
            if dep not in deps:
                for f, line in sites:
                    errors.append(f"{f}:{line}: {module} may not include {dep}/ (src/layers.txt: "
                                  f"{module}: {' '.join(sorted(deps)) or '(nothing)'})")
        for dep in sorted(deps - set(graph[module])):
            errors.append(f"src/layers.txt: {module} -> {dep} is listed but no file of {module} includes "
                          f"{dep}/: remove it from the table (and from docs/architecture.md)")

    docs = root / "docs" / "architecture.md"
    cells = docs_cells(docs) if docs.exists() else {}
    for module, deps in table.items():
        if module not in cells:
            errors.append(f"docs/architecture.md: no row for `{module}/` in the module table")
        elif cells[module] != deps:
            want = ", ".join(sorted(deps)) or "nothing else"
            errors.append(f"docs/architecture.md: `{module}/` may include '{', '.join(sorted(cells[module]))}'"
                          f" but src/layers.txt says '{want}'")

    for module in sorted(set(cells) - set(table)):
        errors.append(f"docs/architecture.md: a row for `{module}/`, which src/layers.txt does not list")

    readme = root / "README.md"
    block = README_BLOCK.search(readme.read_text()) if readme.exists() else None
    if block is None:
        errors.append("README.md: no floor diagram between <!-- layers:begin --> and <!-- layers:end -->")
    elif block.group(1).rstrip("\n") != readme_diagram(table):
        errors.append("README.md: the floor diagram is not src/layers.txt's; replace it with the output of "
                      "scripts/check_layering.py --readme")

    if errors:
        print("layering check failed:")
        for e in errors:
            print("  " + e)
        return 1
    arrows = sum(len(d) for d in table.values())
    print(f"layering check passed: {len(table)} modules, {arrows} arrows, every #include in the table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
