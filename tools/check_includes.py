#!/usr/bin/env python3
"""Checks that kiln's folders include one another one way only.

Every #include of a kiln header is resolved to the folder ("component") that
holds it; a component may include only itself and the components its rule
names below. The rules themselves must form no cycle. tools/ reaches past the
public API only in the files ALLOWED_TOOLS_EXCEPTIONS names, each with its
reason. Run from the source root; exits 1 listing every broken rule.

  tools/check_includes.py            check the tree
  tools/check_includes.py --graph    print the folder graph (component -> includes)
"""
import os
import re
import sys

PUBLIC = "include/kiln"
BASE = "src/base"
GRAPH = "graph"
KERNEL = "src/kernel"
SHADERS = "shaders"
BACKEND_API = "backends"  # backend.h, language.h, registry.h, vendor_library.h

# Component -> the components it may include (besides itself). Lowest first.
RULES = {
    PUBLIC: [],
    BASE: [PUBLIC],
    GRAPH: [BASE, PUBLIC],
    KERNEL: [BASE, PUBLIC],
    SHADERS: [KERNEL, BASE, PUBLIC],
    "backends/cuda_style": [BACKEND_API, BASE, PUBLIC],
    "backends/vulkan": [BACKEND_API, BASE, PUBLIC],
    "backends/cuda": ["backends/cuda_style", BACKEND_API, BASE, PUBLIC],
    "backends/hip": ["backends/cuda_style", BACKEND_API, BASE, PUBLIC],
    "backends/cpu": [BACKEND_API, BASE, PUBLIC],
    "backends/null": [BACKEND_API, BASE, PUBLIC],
    BACKEND_API: [BASE, PUBLIC],
    # The one file that names every backend: its line in the registry.
    "backends/registry.cpp": ["backends/vulkan", "backends/cuda", "backends/hip", "backends/cpu", "backends/null",
                              BACKEND_API, BASE, PUBLIC],
    "src/render": [BACKEND_API, KERNEL, BASE, PUBLIC],
    "src/cache": [BACKEND_API, BASE, PUBLIC],
    "src/lower": [SHADERS, KERNEL, GRAPH, BACKEND_API, BASE, PUBLIC],
    "src/fuse": ["src/lower", SHADERS, KERNEL, GRAPH, BACKEND_API, BASE, PUBLIC],
    "src/tune": ["src/fuse", "src/lower", "src/render", "src/cache", SHADERS, KERNEL, GRAPH, BACKEND_API, BASE,
                 PUBLIC],
    "src/compile": ["src/tune", "src/fuse", "src/lower", "src/render", "src/cache", SHADERS, KERNEL, GRAPH,
                    BACKEND_API, BASE, PUBLIC],
    "src/artifact": ["src/compile", "src/tune", "src/cache", "src/render", KERNEL, GRAPH, BACKEND_API, BASE, PUBLIC],
    "src/runtime": ["src/artifact", "src/compile", "src/tune", "src/fuse", "src/render", "src/cache", KERNEL, GRAPH,
                    BACKEND_API, BASE, PUBLIC],
    "src/trace": ["src/runtime", "src/compile", KERNEL, GRAPH, BACKEND_API, BASE, PUBLIC],
    # src/tune for worker_location.h: the SentencePiece module is found where the tuning worker is.
    "src/generate": ["src/runtime", "src/compile", "src/tune", GRAPH, BACKEND_API, BASE, PUBLIC],
    # The model-level tuning job (include/kiln/tune.h) and the tuning worker
    # process run models, so they sit above the executor.
    "src/tune/job": ["src/runtime", "src/tune", "src/compile", "src/fuse", "src/lower", "src/cache", SHADERS, KERNEL,
                     GRAPH, BACKEND_API, BASE, PUBLIC],
    "src/tune/worker": ["src/runtime", "src/tune", "src/compile", "src/fuse", "src/lower", "src/render", "src/cache",
                        SHADERS, KERNEL, GRAPH, BACKEND_API, BASE, PUBLIC],
    # The zoo is written with the public builder, as an application would.
    "src/zoo": [BASE, PUBLIC],
    "tools": [BASE, PUBLIC],
}

# tools/ files that reach past the public API, and why.
ALLOWED_TOOLS_EXCEPTIONS = {
    "tools/cmd_check.cpp": "traces the executor kernel by kernel beside the reference implementation's observer",
}

SOURCE_ROOTS = ["include", "src", "graph", "shaders", "backends", "tools"]
SOURCE_SUFFIXES = (".h", ".cpp", ".h.in", ".cpp.in")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def component_of(path):
    """The component a source path belongs to (the longest rule prefix), or None."""
    best = None
    for name in RULES:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def resolve(including, kind, target, files):
    """The source-root path an include names, or None for a system header."""
    if kind == "<":
        return "include/" + target if target.startswith("kiln/") else None
    local = os.path.normpath(os.path.join(os.path.dirname(including), target))
    for candidate in (target, local, "include/" + target):
        if candidate in files:
            return candidate
    return None


def find_cycle(rules):
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for dep in rules.get(node, []):
            if state.get(dep) == "open":
                return trail + [node, dep]
            if dep not in state:
                found = visit(dep, trail + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in rules:
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def list_sources(root):
    files = set()
    for top in SOURCE_ROOTS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith(SOURCE_SUFFIXES):
                    files.add(os.path.relpath(os.path.join(dirpath, name), root))
    return files


def check(root, rules=RULES, exceptions=ALLOWED_TOOLS_EXCEPTIONS):
    """(problems, edges): every broken rule as text, and the component graph."""
    problems = []
    cycle = find_cycle(rules)
    if cycle:
        problems.append("the rules form a cycle: " + " -> ".join(cycle))
    for name, deps in rules.items():
        for dep in deps:
            if dep not in rules:
                problems.append(f"rule for {name} names {dep}, which is no component")
    files = list_sources(root)
    edges = {}
    for path in sorted(files):
        source = component_of(path)
        if source is None:
            problems.append(f"{path}: in no component (add a rule to tools/check_includes.py)")
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = resolve(path, match.group(1), match.group(2), files)
                if target is None:
                    continue
                dest = component_of(target)
                if dest is None or dest == source:
                    continue
                edges.setdefault(source, {}).setdefault(dest, 0)
                edges[source][dest] += 1
                if dest in rules.get(source, []):
                    continue
                if path in exceptions:
                    continue
                problems.append(f"{path}:{number}: {source} may not include {target} ({dest}); "
                                f"{source} may include: {', '.join(rules.get(source, [])) or 'nothing'}")
    for path in exceptions:
        if path not in files:
            problems.append(f"{path}: named as a tools/ exception but no such file")
    return problems, edges


def main(argv):
    root = os.getcwd()
    problems, edges = check(root)
    if "--graph" in argv:
        for source in sorted(edges):
            print(f"{source} -> " + ", ".join(f"{d} ({n})" for d, n in sorted(edges[source].items())))
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} include rule(s) broken; the rules are in tools/check_includes.py "
              "and each folder's README")
        return 1
    print(f"include rules hold ({len(ALLOWED_TOOLS_EXCEPTIONS)} tools/ exceptions, "
          f"{sum(len(d) for d in edges.values())} folder edges)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
