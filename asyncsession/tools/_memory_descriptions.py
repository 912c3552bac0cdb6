"""The model-facing descriptions of the six memory tools: how to keep memories, for the model.

Kept apart from `asyncsession.tools._memory` because they are prose to edit, not code to read.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "VIEW_DESCRIPTION",
    "CREATE_DESCRIPTION",
    "STR_REPLACE_DESCRIPTION",
    "INSERT_DESCRIPTION",
    "DELETE_DESCRIPTION",
    "RENAME_DESCRIPTION",
]

_FRONT_MATTER: Final = """\
Memory files are Markdown and start with front matter:
  ---
  name: <short name>
  description: <one line; decides whether the memory is relevant later>
  type: <user | feedback | project | reference>
  ---
  <the memory>"""

VIEW_DESCRIPTION: Final = f"""\
Show a file or directory of your long-term memory.

- A directory is listed two levels deep with file sizes; a file is shown with line numbers.
- Paths are relative to the memory root; '' or '/' is the root itself.
- Start with 'MEMORY.md': the index of every memory, one line each. Read it before saving or \
changing memories.
- For long files, pass view_range='start,end' to see only those lines.

{_FRONT_MATTER}
Types: user (who the user is), feedback (how they want you to work, corrections and confirmed \
approaches), project (goals, decisions, deadlines the code does not show), reference (where \
to find things elsewhere)."""

CREATE_DESCRIPTION: Final = f"""\
Create a new memory file (it must not exist yet; to change a file use MemoryStrReplace or \
MemoryInsert). Missing parent directories are created.

Saving a memory takes two steps:
1. MemoryCreate the memory file, named after its topic (e.g. 'feedback_testing.md').
2. Add its line to the index 'MEMORY.md' with MemoryInsert or MemoryStrReplace:
   '- [Title](file.md) — one-line hook' (at most about 150 characters).
Check MEMORY.md first and update an existing memory instead of creating a duplicate. Do not \
save code patterns, file paths, version-control history, fix recipes, things already \
documented, or the state of the current task.

{_FRONT_MATTER}
For feedback and project memories write the rule or fact, then '**Why:** <reason>' and \
'**How to apply:** <when it applies>'."""

STR_REPLACE_DESCRIPTION: Final = """\
Replace text in a memory file.

- old_str must match the file exactly (whitespace and line breaks included) and occur exactly \
once; if it occurs several times, include more of the surrounding text. It must not be empty.
- An empty new_str deletes the matched text.
- Returns the edited lines with line numbers.

Use it to correct or update a memory (keep its name and description in step), to fix a line \
in MEMORY.md after renaming a memory or changing its description, and to remove a memory's \
line from MEMORY.md after deleting the file."""

INSERT_DESCRIPTION: Final = """\
Insert text as new line(s) into a memory file.

- insert_line is the line to insert after: 0 puts the text before the first line, the file's \
line count (see MemoryView) appends it at the end.
- The text becomes its own line(s); it does not need a trailing line break.

Typical use: step 2 of saving a memory, appending its index line to MEMORY.md:
'- [Title](file.md) — one-line hook'."""

DELETE_DESCRIPTION: Final = """\
Delete a memory file, or a directory with everything in it. This cannot be undone; the root \
itself cannot be deleted.

Delete memories that turned out to be wrong, outdated or superseded instead of leaving them. \
Afterwards remove the memory's line from MEMORY.md with MemoryStrReplace."""

RENAME_DESCRIPTION: Final = """\
Rename or move a memory file or directory. The source must exist and the destination must \
not; missing parent directories of the destination are created.

Use it to reorganise memories by topic. Afterwards update the link in MEMORY.md with \
MemoryStrReplace."""
