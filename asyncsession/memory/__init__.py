"""Long-term memory: one scope's curated Markdown files, and the prompt that teaches a model them.

A `MemoryStore` is bound to one scope (a user, a tenant, an agent). Two stores ship:
`DirectoryMemoryStore` (a sandboxed directory per scope) and `MongoMemoryStore` (a document per
file, compare-and-set writes). The companion system prompt is `render_memory_prompt`. The six
tools a model keeps its memories with (`MemoryView`, `MemoryCreate`, `MemoryStrReplace`,
`MemoryInsert`, `MemoryDelete`, `MemoryRename`) are
[`AutoMemoryTools`][asyncsession.tools.AutoMemoryTools], with every other tool in
[`asyncsession.tools`][asyncsession.tools].

```python
store = MongoMemoryStore(db, scope=user_id)
await store.ensure_indexes()
tools = AutoMemoryTools(store).as_tools()   # six Tools: name, description, schema, invoke
system = render_memory_prompt(store.root)
```
"""

from .directory import DirectoryMemoryStore
from .mongo import MongoMemoryStore
from .prompt import render_memory_prompt
from .store import (
    MemoryBackendError,
    MemoryEntry,
    MemoryExists,
    MemoryFile,
    MemoryIsADirectory,
    MemoryNotADirectory,
    MemoryNotFound,
    MemoryPathError,
    MemoryStore,
    MemoryStoreError,
    MemoryTooLarge,
    MemoryWriteConflict,
    normalize_memory_path,
    validate_memory_scope,
)

__all__ = [
    "DirectoryMemoryStore",
    "MemoryBackendError",
    "MemoryEntry",
    "MemoryExists",
    "MemoryFile",
    "MemoryIsADirectory",
    "MemoryNotADirectory",
    "MemoryNotFound",
    "MemoryPathError",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryTooLarge",
    "MemoryWriteConflict",
    "MongoMemoryStore",
    "normalize_memory_path",
    "render_memory_prompt",
    "validate_memory_scope",
]
