"""Encryption at rest, per user: each user's content under a data key of their own.

Values are encrypted in the process before they are stored, with MongoDB's explicit
client-side encryption (libmongocrypt, through PyMongo): a data key per user in a key vault
collection, each data key encrypted in turn by a master key from a key service (or, for
development, a local key). Deleting a user's data key makes every copy of their content
unreadable, in the database, its replicas and its backups: that is how the
stores' ``erase_user`` erases a user.

```python
encryption = EncryptionOptions.local(EncryptionOptions.generate_local_key())  # development
memories = MongoMemoryStore(db, scope=user_id, encryption=encryption)
```

Needs the ``[encryption]`` extra: ``pip install 'asyncsession[encryption]'``. What is protected
and what is not: see the security guide (``docs/security.md``).
"""

from ._keys import UserKeys
from ._options import (
    EncryptionOptions,
)

__all__ = [
    "EncryptionOptions",
    "UserKeys",
]
