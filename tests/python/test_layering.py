"""The Python package's layering (issue 23): the modules of python/fastglu import one another one
way (public API -> autograd -> torch.library ops -> op layer -> _C), never in a circle; one name
per thing; no run or session numbers in the sources. Read from the sources with ast (no import)."""

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "python" / "fastglu"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(name: str) -> bool:
    return (PKG.parent / Path(*name.split(".")) / "__init__.py").is_file()


def import_graph(root: Path = PKG) -> dict:
    """{module: {modules of the package it imports at module level or in a function}}."""
    modules = {_module_name(p): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if _is_package(name) else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # `from . import x` / `from .pkg import x`: x may be a submodule
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in modules:  # the module itself, or the package that holds it
                    t = t.rpartition(".")[0]
                if t and t != name and t in modules:
                    deps.add(t)
        graph[name] = deps
    return graph


def find_cycle(graph: dict):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in state:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            c = visit(m)
            if c:
                return c
    return None


def test_the_package_imports_without_a_cycle():
    graph = import_graph()
    assert "fastglu.ops" in graph and "fastglu.functional" in graph
    # a package module imports its submodules: leave the package's own __init__ out of the walk, as
    # `import fastglu.x` runs fastglu/__init__ first and only then x (no circle through it)
    graph = {m: {d for d in deps if d != "fastglu"} for m, deps in graph.items()}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_the_layers_import_downwards():
    graph = import_graph()
    layer = {
        "fastglu.ops": 0,
        "fastglu.library": 1,
        "fastglu.fp8": 1,
        "fastglu.functional": 2,
        "fastglu.gemm": 2,
        "fastglu.mlp_block": 3,
        "fastglu.fp8_mlp": 4,
        "fastglu.megatron_mlp": 4,
        "fastglu.modules": 5,
        "fastglu.megatron": 5,
    }
    for m, deps in graph.items():
        for d in deps:
            if m in layer and d in layer:
                assert layer[d] < layer[m], f"{m} imports {d}, a layer at or above its own"


def test_find_cycle_finds_one():
    # the checker itself: a circle like functional -> glu -> library -> functional is found
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_one_name_per_thing():
    """No module of the package shares its name with a public function of the package (the
    function ``fastglu.glu`` once shadowed the module ``fastglu.glu``), and every public function
    of the family is defined once."""
    modules = {p.stem for p in PKG.glob("*.py")}
    init = ast.parse((PKG / "__init__.py").read_text())
    exported = set()
    for node in ast.walk(init):
        if isinstance(node, ast.ImportFrom):
            exported.update(a.asname or a.name for a in node.names)
    shadowed = sorted(
        (modules & exported) - {"ops", "megatron", "modules", "library", "functional", "fp8"}
    )
    assert not shadowed, f"a function and a module share the names {shadowed}"
    defined = {}
    for p in PKG.glob("*.py"):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(p.stem)
    twice = {n: ms for n, ms in defined.items() if len(ms) > 1}
    assert not twice, f"defined in several modules: {twice}"


def test_no_run_or_session_numbers_in_the_sources():
    hits = [
        f"{p.relative_to(PKG.parent)}:{i}"
        for p in PKG.parent.rglob("*")
        if p.is_file() and p.suffix in (".py", ".c", ".md", ".txt")
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if re.search(r"\b(run|session) [0-9]", line)
    ]
    assert not hits, hits
