"""The package's layering, read from its source: imports form no cycle, neither
at module level nor through the imports inside functions (a lazy import defers
loading, it does not make an upward dependency right; the few allowed are
listed with their reason), and the public tilesplash.distributed is a thin face
of the private tilesplash._dist that no other module reaches behind."""

from __future__ import annotations

import ast
import pathlib

import tilesplash
import tilesplash.distributed

PACKAGE = pathlib.Path(tilesplash.__file__).parent


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def module_level_imports(everywhere: bool = False) -> dict[str, set[str]]:
    """Every tilesplash module -> the tilesplash modules it imports at module level
    (everywhere=True: inside functions too)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = set()
        for node in (ast.walk(tree) if everywhere else tree.body):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                target = resolve(name, path.name == "__init__.py", node.level, node.module)
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name.startswith("tilesplash"))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tilesplash"):
                edges.add(node.module)
        # A submodule's parent packages are initialised before it anyway.
        graph[name] = {e for e in edges
                       if e in modules and e != name and not name.startswith(e + ".")}
    return graph


# Function-level imports allowed to close a cycle, each with why (keep it short).
LAZY_CYCLE_EDGES: dict[tuple[str, str], str] = {}


def find_cycle(graph):
    """One import cycle, as "import cycle: a -> b -> a", or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    try:
        for node in sorted(graph):
            if node not in state:
                visit(node, [node])
    except AssertionError as found:
        return found.args[0]
    return None


def test_module_level_imports_form_no_cycle():
    graph = module_level_imports()
    assert "tilesplash._attention" in graph and "tilesplash._torch_ops" in graph
    assert find_cycle(graph) is None


def test_no_cycle_through_function_level_imports_either():
    graph = module_level_imports(everywhere=True)
    for (source, target), why in LAZY_CYCLE_EDGES.items():
        assert why and target in graph[source], (source, target)
        graph[source].discard(target)
    assert find_cycle(graph) is None


def test_attention_and_the_torch_op_do_not_import_each_other():
    graph = module_level_imports()
    assert "tilesplash._attention" not in graph["tilesplash._torch_ops"]
    assert "tilesplash._torch_ops" not in graph["tilesplash._attention"]


def test_distributed_is_the_public_face_of_the_private_package():
    public = set(tilesplash.distributed.__all__)
    assert public == {"DEFAULT_TIMEOUT", "MAX_TIMEOUT", "SequenceShards", "UlyssesExchange", "head_range",
                      "release_buffers", "ring_attention", "ulysses_attention",
                      "ulysses_exchange"}
    for name in public:
        assert getattr(tilesplash.distributed, name) is getattr(tilesplash._dist, name)
    # distributed.py holds no code of its own, and nothing reaches behind it.
    source = (PACKAGE / "distributed.py").read_text()
    assert len(source.splitlines()) < 80
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "distributed._" not in text.replace("torch.distributed", ""), path


# obj._name reads across modules allowed, each with why (keep it short).
FOREIGN_PRIVATE_ALLOWED = {
    # diffusers' own attributes on its processors and enums, which the drop-in must set
    ("tilesplash.diffusers._install", "_attention_backend"): "diffusers' processor field",
    ("tilesplash.diffusers._dispatch", "_value2member_map_"): "diffusers' backend Enum",
    ("tilesplash.diffusers._dispatch", "_member_map_"): "diffusers' backend Enum",
    ("tilesplash.diffusers._dispatch", "_member_names_"): "diffusers' backend Enum",
    ("tilesplash.diffusers._dispatch", "_name_"): "diffusers' backend Enum",
    ("tilesplash.diffusers._dispatch", "_value_"): "diffusers' backend Enum",
    ("tilesplash.diffusers._steps", "_version"): "torch's tensor version counter",
    ("tilesplash.diffusers._dispatch", "_backends"): "diffusers' backend registry",
    ("tilesplash.diffusers._dispatch", "_AttentionBackendRegistry"): "diffusers' registry",
    ("tilesplash.diffusers._install", "_tilesplash_original"): "our mark on its processors",
    ("tilesplash.diffusers._install", "_parallel_config"): "diffusers' processor field (its CP)",
    ("tilesplash.diffusers._dispatch", "_ulysses_local_rank"): "diffusers' ContextParallelConfig",
}


def private_reads_across_modules() -> list[str]:
    """obj._name where obj is neither self / cls nor a module, and _name is not defined
    (as a class attribute, a self._name assignment or a function) in the same module."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        modules = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                   if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
        own = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")}
        own |= {node.name for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        own |= {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
        own |= {node.target.id for node in ast.walk(tree)
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            base = node.value.id if isinstance(node.value, ast.Name) else ast.unparse(node.value)
            if (not attr.startswith("_") or attr.startswith("__") or base in ("self", "cls")
                    or base in modules or attr in own
                    or (name, attr) in FOREIGN_PRIVATE_ALLOWED):
                continue
            found.append(f"{name}:{node.lineno}: {base}.{attr}")
    return found


def test_no_private_attribute_is_read_across_modules():
    assert private_reads_across_modules() == []


def private_names_imported_across_modules() -> list[str]:
    """`from <tilesplash module> import _name` where _name is not a module: a private
    function, class or constant reached from another module."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        package = path.parent
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                source = package
                for _ in range(node.level - 1):
                    source = source.parent
            elif node.module and node.module.split(".")[0] == "tilesplash":
                source = PACKAGE.parent
            else:
                continue  # another library's names are its business
            for part in (node.module or "").split("."):
                if part:
                    source = source / part
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                if (source / name).is_dir() or any(source.glob(f"{name}.*")):
                    continue  # a private module (.py or the extension): the package's layering
                found.append(f"{module_name(path)}:{node.lineno}: {node.module or '.'}.{name}")
    return found


def test_no_private_name_is_imported_across_modules():
    assert private_names_imported_across_modules() == []
