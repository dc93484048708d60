"""The import structure: layers only import downwards, and no import circles between parts.

Read from the source (every ``import`` statement, module level or inside a function, parsed
with ast), so it holds without importing anything. ``kernels/`` is read as ``lightmod.kernels``,
the name it is installed under. setup.cfg's ``[importlinter]`` contract states the same layer
order for ``lint-imports``.
"""
import ast
import collections
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# bottom to top: a module may import modules of its own layer and of the layers below
LAYERS = [
    ("foundation", ("lightmod._version", "lightmod.base", "lightmod.grad_req", "lightmod.rng")),
    ("kernels", ("lightmod.kernels",)),
    ("operator", ("lightmod.operator",)),
    ("arrays", ("lightmod.ndarray", "lightmod.symbol")),
    ("executor", ("lightmod.executor",)),
    ("module", ("lightmod.module",)),
]


def _module_files():
    files = {}
    for top in ("lightmod", "kernels"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if parts[0] == "kernels":
                    parts.insert(0, "lightmod")
                if parts[-1] == "__init__":
                    parts.pop()
                files[".".join(parts)] = path
    return files


def _resolve(name, modules):
    """The project module ``name`` refers to (its longest known prefix), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _import_graph():
    modules = _module_files()
    graph = collections.defaultdict(set)
    for mod, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                    base = base + "." + node.module if node.module else base
                else:
                    base = node.module
                names = [base + "." + a.name if base + "." + a.name in modules else base
                         for a in node.names]
            else:
                continue
            for name in names:
                target = _resolve(name, modules)
                if target is not None and target != mod:
                    graph[mod].add(target)
    return modules, graph


def _layer_of(mod):
    for level, (_, prefixes) in enumerate(LAYERS):
        if any(mod == p or mod.startswith(p + ".") for p in prefixes):
            return level
    return None


def _cycles(nodes, graph):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start] & nodes)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w] & nodes))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def imports():
    return _import_graph()


def test_every_layer_exists(imports):
    modules, _ = imports
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            assert prefix in modules, "layer %s names %s, which is not a module" % (name, prefix)


def test_no_import_reaches_a_higher_layer(imports):
    modules, graph = imports
    upward = []
    for mod in sorted(modules):
        here = _layer_of(mod)
        if here is None:
            continue
        # follow imports through modules outside the layers (lightmod.random, ...): a chain
        # through them reaches the higher layer all the same
        seen, todo = {mod}, [(mod, t) for t in graph[mod]]
        while todo:
            via, target = todo.pop()
            if target in seen:
                continue
            seen.add(target)
            # the root package imports every part: reaching it reaches every layer
            assert target != "lightmod", "%s imports the lightmod package itself" % via
            there = _layer_of(target)
            if there is None:
                todo.extend((target, t) for t in graph[target])
            elif there > here:
                upward.append("%s (%s) reaches %s (%s) through %s" % (
                    mod, LAYERS[here][0], target, LAYERS[there][0], via))
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_circles_between_parts(imports):
    """Collapsed to their top-level parts (lightmod.X), the imports form no circle through a
    layered part; the root package, which imports every part to build the namespace, is left
    out."""
    modules, graph = imports

    def part(mod):
        return ".".join(mod.split(".")[:3 if mod.startswith("lightmod.kernels.") else 2])

    parts = collections.defaultdict(set)
    for mod, targets in graph.items():
        for target in targets:
            if "lightmod" not in (mod, target) and part(mod) != part(target):
                parts[part(mod)].add(part(target))
    nodes = set(parts) | {t for ts in parts.values() for t in ts}
    layered = [c for c in _cycles(nodes, parts) if any(_layer_of(p) is not None for p in c)]
    assert layered == []


def test_no_import_circle_anywhere(imports):
    """No module or package of lightmod/ or kernels/ reaches itself through imports, counting
    the imports inside functions. (Where a lower module must call code that builds on it, the
    owner installs the function instead: see docs/architecture.md.)"""
    modules, graph = imports
    assert _cycles(set(modules), graph) == []


@pytest.mark.parametrize("package", ["lightmod.kernels", "lightmod.operator", "lightmod.symbol"])
def test_no_circles_inside(imports, package):
    modules, graph = imports
    inside = {m for m in modules if m == package or m.startswith(package + ".")}
    assert _cycles(inside, graph) == []


def test_the_cycle_finder_finds_cycles():
    graph = collections.defaultdict(set, {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert _cycles({"a", "b", "c", "d"}, graph) == [["a", "b", "c"]]
    assert _cycles({"a", "b", "d"}, graph) == []
