"""Graphs: breadth-first search (shortest path length) and connected components, on adjacency lists."""

from __future__ import annotations

from ..registry import Task, register


def _adjacency(n: int, edges) -> list[list[int]]:
    adj = [set() for _ in range(n)]
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    return [sorted(a) for a in adj]


def _adj_memory(adj) -> dict:
    mem = {}
    for u, nbrs in enumerate(adj):
        mem[f"deg[{u}]"] = len(nbrs)
        for k, v in enumerate(nbrs):
            mem[f"e[{u}][{k}]"] = v
    return mem


def _adj_text(adj, hint: bool) -> str:
    parts = [f"{u}: {','.join(map(str, nbrs)) or '-'}" for u, nbrs in enumerate(adj)]
    if hint:
        parts = [f"#{u}:{p}" for u, p in enumerate(parts)]
    return " | ".join(parts)


def _bfs(t, adj, source: int, label_cell: str, label) -> list[int]:
    """Trace one BFS from ``source``: the label cell of every newly reached node gets ``label(u)`` (distance + 1 or
    the component number) through an atomic op; returns the visiting order."""
    t.set(f"q[{t['qt']}]", source)
    t.op("inc", ["qt"], ["qt"])
    t.next()
    order = []
    while t.op("lt", ["qh", "qt"], ["f"]):
        u = t.op("copy", [f"q[{t['qh']}]"], ["u"])
        t.op("inc", ["qh"], ["qh"])
        t.next()
        order.append(u)
        for k in range(len(adj[u])):
            v = t.op("copy", [f"e[{u}][{k}]"], ["v"])
            if t.op("neg", [f"{label_cell}[{v}]"], ["f"]):
                label(u, v)
                t.op("copy", ["v"], [f"q[{t['qt']}]"])
                t.op("inc", ["qt"], ["qt"])
            t.next()
    t.next()
    return order


def _random_graph(rng, n: int, connected: bool) -> list[list[int]]:
    edges = set()
    if connected:
        order = list(range(n))
        rng.shuffle(order)
        for k in range(1, n):
            u, v = order[k], order[rng.randrange(k)]
            edges.add((min(u, v), max(u, v)))
        extra = rng.randint(0, n // 2)
    else:
        extra = rng.randint(0, n - 1)
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if (u, v) not in edges]
    edges |= set(rng.sample(pairs, min(extra, len(pairs))))
    return _adjacency(n, edges)


@register
class BFS(Task):
    name = "bfs"
    algorithm_class = "graph"
    description = "breadth-first search: number of edges on a shortest path from node 0 to the last node"
    length_unit = "nodes"
    train_lengths = (3, 8)
    ood_lengths = (9, 16)

    def sample(self, rng, length):
        return {"adj": _random_graph(rng, length, connected=True)}

    def solve(self, inp):  # Floyd-Warshall: independent of the traced BFS
        adj, n = inp["adj"], len(inp["adj"])
        inf = float("inf")
        d = [[0 if i == j else (1 if j in adj[i] else inf) for j in range(n)] for i in range(n)]
        for k in range(n):
            for i in range(n):
                for j in range(n):
                    d[i][j] = min(d[i][j], d[i][k] + d[k][j])
        return str(d[0][n - 1] if d[0][n - 1] < inf else -1)

    def memory(self, inp):
        return _adj_memory(inp["adj"])

    def program(self, t, inp):
        adj = inp["adj"]
        for v in range(len(adj)):
            t.set(f"d[{v}]", -1)
        t.set("d[0]", 0)
        t.set("qh", 0)
        t.set("qt", 0)

        def label(u, v):
            t.op("inc", [f"d[{u}]"], [f"d[{v}]"])

        order = _bfs(t, adj, 0, "d", label)
        dist = ", ".join(f"{u}:{t[f'd[{u}]']}" for u in order)
        t.note(f"BFS from 0 visits nodes in order with distances {dist}.")

    def read_answer(self, memory, inp):
        return str(memory[f"d[{len(inp['adj']) - 1}]"])

    def question(self, inp, hint=False):
        n = len(inp["adj"])
        return (
            f"An undirected graph has nodes 0 to {n - 1} with adjacency lists {_adj_text(inp['adj'], hint)}. "
            f"How many edges are on a shortest path from 0 to {n - 1}?"
        )


@register
class Components(Task):
    name = "components"
    algorithm_class = "graph"
    description = "number of connected components (a BFS from every node not yet labelled)"
    length_unit = "nodes"
    train_lengths = (2, 8)
    ood_lengths = (9, 16)

    def sample(self, rng, length):
        return {"adj": _random_graph(rng, length, connected=False)}

    def solve(self, inp):  # union-find: independent of the traced BFS
        parent = list(range(len(inp["adj"])))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for u, nbrs in enumerate(inp["adj"]):
            for v in nbrs:
                parent[find(u)] = find(v)
        return str(len({find(x) for x in range(len(parent))}))

    def memory(self, inp):
        return _adj_memory(inp["adj"])

    def program(self, t, inp):
        adj = inp["adj"]
        for v in range(len(adj)):
            t.set(f"l[{v}]", -1)
        t.set("k", 0)
        t.set("qh", 0)
        t.set("qt", 0)
        t.next()

        def label(u, v):
            t.op("copy", ["k"], [f"l[{v}]"])

        for s in range(len(adj)):
            if t.op("neg", [f"l[{s}]"], ["f"]):
                t.op("inc", ["k"], ["k"])
                t.op("copy", ["k"], [f"l[{s}]"])
                order = _bfs(t, adj, s, "l", label)
                t.note(f"Component {t['k']}: nodes {','.join(map(str, sorted(order)))}.")
            else:
                t.next()

    def read_answer(self, memory, inp):
        return str(memory["k"])

    def question(self, inp, hint=False):
        n = len(inp["adj"])
        return (
            f"An undirected graph has nodes 0 to {n - 1} with adjacency lists {_adj_text(inp['adj'], hint)}. "
            "How many connected components does it have?"
        )
