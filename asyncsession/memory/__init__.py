"""Long-term memory: one scope's curated Markdown files, and the six tools a model keeps them with.

`AutoMemoryTools` gives a model six tools (`MemoryView`, `MemoryCreate`, `MemoryStrReplace`,
`MemoryInsert`, `MemoryDelete`, `MemoryRename`) over a `MemoryStore` bound to one scope (a
user, a tenant, an agent). Two stores ship: `DirectoryMemoryStore` (a sandboxed directory per
scope) and `MongoMemoryStore` (a document per file, compare-and-set writes). The companion
system prompt is `render_memory_prompt`.

```python
store = MongoMemoryStore(db, scope=user_id)
await store.ensure_indexes()
tools = AutoMemoryTools(store)
specs = tools.tool_specs()          # name, description, JSON schema, coroutine per tool
system = render_memory_prompt(store.root)
```
"""

from .directory import DirectoryMemoryStore
from .mongo import MongoMemoryStore
from .prompt import CONSOLIDATION_REMINDER, MEMORY_SYSTEM_PROMPT, render_memory_prompt
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
from .tools import MEMORY_TOOL_NAMES, AutoMemoryTools, MemoryToolSpec

__all__ = [
    "CONSOLIDATION_REMINDER",
    "MEMORY_SYSTEM_PROMPT",
    "MEMORY_TOOL_NAMES",
    "AutoMemoryTools",
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
    "MemoryToolSpec",
    "MemoryWriteConflict",
    "MongoMemoryStore",
    "normalize_memory_path",
    "render_memory_prompt",
    "validate_memory_scope",
]
