"""Name → implementation registries for metrics, processors, inference types and loaders."""

from __future__ import annotations

from typing import Callable, Generic, Optional, TypeVar

from lalmeval.errors import UserError, closest

T = TypeVar("T")


class Registry(Generic[T]):
    """A named table of implementations filled by a decorator."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._derived: dict[str, Callable[[str, T], T]] = {}   # prefix -> what makes `prefix + name` of item `name`

    def derive(self, prefix: str, make: Callable[[str, T], T]) -> None:
        """Make `prefix + name` valid for every registered `name`: the item `make(name, item)`, made when first asked for."""
        self._derived[prefix] = make

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: make the decorated object available under `name`."""

        def add(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' registered twice")
            self._items[name] = item
            return item

        return add

    def get(self, name: str, where: Optional[str] = None) -> T:
        """The item called `name`; an unknown name is a UserError naming `where`, the closest name and every valid one."""
        if name not in self._items:
            for start, make in self._derived.items():
                base = name[len(start):]
                if name.startswith(start) and base in self._items:
                    self._items[name] = make(base, self._items[base])
        try:
            return self._items[name]
        except KeyError:
            prefix = f"{where}: " if where else ""
            valid = f"; valid {self.kind}s: {', '.join(self.names())}"
            raise UserError(f"{prefix}unknown {self.kind} '{name}'{closest(name, self._items)}{valid}") from None

    def names(self) -> list[str]:
        """All registered names, sorted (a derived name only once it has been asked for)."""
        return sorted(self._items)
