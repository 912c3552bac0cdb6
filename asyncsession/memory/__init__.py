"""Long-term memory: one scope's curated Markdown files.

A `MemoryStore` is bound to one scope (a user, a tenant, an agent). Two stores ship:
`DirectoryMemoryStore` (a sandboxed directory per scope) and `MongoMemoryStore` (a document per
file, compare-and-set writes). The six tools a model keeps its memories with, and the system
prompt that teaches it them, are [`AutoMemoryTools`][asyncsession.tools.AutoMemoryTools].

```python
store = MongoMemoryStore(db, scope=user_id)
await store.ensure_indexes()
memory = AutoMemoryTools(store)
tools, system = memory.as_tools(), memory.system_prompt   # six Tools, and their prompt
```
"""

from ..exceptions import MemoryStoreError
from .directory import DirectoryMemoryStore
from .mongo import MongoMemoryStore
from .store import MemoryEntry, MemoryFile, MemoryStore

__all__ = [
    "DirectoryMemoryStore",
    "MemoryEntry",
    "MemoryFile",
    "MemoryStore",
    "MemoryStoreError",
    "MongoMemoryStore",
]
