"""JSON (and the YAML settings files) read strictly, from files or text: UTF-8, no duplicate keys,
bounded size and nesting.

Every problem is an error of the caller's chosen type (`ConfigError` for a checkpoint's configs,
`QuestionError` for a questions file, ...) whose message starts with the file or option it came from,
never bare `[Errno ...]` or codec text. Python's json keeps the last of two equal keys, which would
make a duplicated question id silently drop the first question: here it is an error.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from laya_opt.util.errors import InputError

MAX_FILE_BYTES = 64 << 20   # the largest real JSON is the multilingual tokenizer.json, 34 MB
MAX_DEPTH = 64              # objects and lists inside each other; far below Python's recursion limit


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep lists and mappings nest (a scalar is 0), without recursion; stops counting past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def check_depth(value: Any, source: str, error: type[InputError] = InputError, limit: int = MAX_DEPTH) -> None:
    if nesting_depth(value, limit) > limit:
        raise error(f"{source}: nested more than {limit} levels deep")


def loads(text: str, source: str, error: type[InputError] = InputError, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON text; `source` names it in every message (a path, `--state`, `path:line`)."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise error(f"{source}: duplicate key {exc.key!r} (the later value would silently replace the first)") \
            from None
    except ValueError as exc:  # JSONDecodeError, and Python's limit on integer digits (4,300)
        raise error(f"{source}: invalid JSON ({exc})") from None
    except RecursionError:
        raise error(f"{source}: nested more than {max_depth} levels deep") from None
    check_depth(value, source, error, max_depth)
    return value


def read_text(path: Path, error: type[InputError] = InputError, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A UTF-8 text file; missing, unreadable, oversized and undecodable files are errors naming the path."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise error(f"{path}: is a directory, expected a file")
        if size > max_bytes:
            raise error(f"{path}: {size:,} bytes, more than the {max_bytes:,} allowed")
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{path}: not UTF-8 text (line {line}, byte {exc.start}: {exc.reason})") from None


def read_json(path: Path, error: type[InputError] = InputError) -> Any:
    return loads(read_text(path, error), str(path), error)


def write_json(path: Path, data: Any) -> None:
    """Indented UTF-8 JSON with a final newline, the parent folder made: manifests and configs alike."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@functools.cache
def _unique_key_loader():
    """A safe loader that refuses duplicate mapping keys (PyYAML would keep the last one silently); built on
    first use, so that loading a runtime does not import PyYAML."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def read_yaml(path: Path, error: type[InputError]) -> Any:
    """A YAML settings file (experiments, gates files) with a safe loader; problems raise `error` naming the file."""
    import yaml

    text = read_text(path, error)
    try:
        return yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 (a SafeLoader subclass)
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer beyond Python's 4,300-digit limit
        raise error(f"{path}: invalid YAML ({exc})") from None
    except RecursionError:
        raise error(f"{path}: invalid YAML (nested too deeply)") from None
