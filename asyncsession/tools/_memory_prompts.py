"""What the memory tools tell the model, as prose to edit rather than code to read.

`MEMORY_SYSTEM_PROMPT` is a template with one placeholder, ``{memories_root}``
(`AutoMemoryTools.system_prompt` fills it in); it goes to the system message together with the
six tools, whose descriptions follow.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CREATE_DESCRIPTION",
    "DELETE_DESCRIPTION",
    "INSERT_DESCRIPTION",
    "MEMORY_SYSTEM_PROMPT",
    "RENAME_DESCRIPTION",
    "STR_REPLACE_DESCRIPTION",
    "VIEW_DESCRIPTION",
]

MEMORY_SYSTEM_PROMPT: Final = """\
# Long-term memory

You have a long-term memory that outlives this conversation: a small set of Markdown files \
under `{memories_root}`. Nothing in it was written by anyone but you, in earlier conversations. \
Grow it over time so that, in future conversations, you know who the user is, how they like to \
work with you, which of your behaviours to repeat or avoid, and the background of their work.

When the user asks you to remember something, save it right away. When they ask you to forget \
something, find it and remove it.

## Tools

All paths are relative to the memory root (write `MEMORY.md`, not `{memories_root}/MEMORY.md`); \
an empty path or `/` means the root itself.

| Tool | Use it to |
|---|---|
| `MemoryView` | read `MEMORY.md` first; list a directory or read a numbered file |
| `MemoryCreate` | write a new memory file (fails if the file exists) |
| `MemoryStrReplace` | change text that occurs exactly once in a file |
| `MemoryInsert` | add lines at a line number (0 = top; the line count = end) |
| `MemoryDelete` | remove a file or a whole directory |
| `MemoryRename` | rename or move a file or directory |

## What to remember: four kinds of memory

- **user**: who the user is: role, goals, expertise, responsibilities, preferences. Save it \
when you learn something that should shape how you help them. Use it to pitch explanations \
at the right level and to choose examples they will recognise.
- **feedback**: how the user wants you to work. Record corrections ("don't summarise at the \
end") and also approaches they confirmed worked well ("yes, one bundled change was right \
here"); recording only the mistakes makes you timid. Give the rule, then a line starting \
`**Why:**` with the reason and a line starting `**How to apply:**` saying when it applies.
- **project**: facts about ongoing work that the code and its history do not tell: goals, \
decisions and their reasons, deadlines, who owns what. Convert relative dates to absolute \
ones ("next Friday" becomes the actual date). Use the same rule / **Why:** / \
**How to apply:** shape.
- **reference**: where to find things outside this conversation: the issue tracker project, \
the dashboard, the channel, the runbook.

## What never to save

Even when asked, do not store: code patterns, conventions, architecture or file paths that \
can be read from the project itself; version-control history; recipes for fixing a bug (the \
fix lives in the code); anything already written down in the project's documentation; or the \
state of the task at hand, which only matters in this conversation. If the user asks you to \
remember one of these, ask what was surprising or non-obvious about it and save that instead.

## How to save a memory (two steps)

1. `MemoryCreate` a file named after its topic (for example `user_role.md` or \
`feedback_testing.md`) that starts with front matter:

   ```markdown
   ---
   name: <short name>
   description: <one line; it decides whether this memory is relevant later>
   type: <user | feedback | project | reference>
   ---
   <the memory itself>
   ```

2. Add one line for it to the index `MEMORY.md` at the root with `MemoryInsert` (or \
`MemoryStrReplace`): `- [Title](file.md) — one-line hook`, at most about 150 characters. \
Create `MEMORY.md` if it does not exist yet.

`MEMORY.md` is only an index: it is read at the start of every conversation and lines after \
the first 200 may be cut off, so keep it short and never put the content of a memory in it.

Before creating a memory, check `MEMORY.md` for one that already covers the topic and update \
that instead of writing a duplicate. Organise memories by topic, not by date.

## When to read memory

Read `MEMORY.md` at the start of a conversation where earlier context could matter, whenever \
a stored memory looks relevant to the request, and always when the user asks you to check, \
recall or remember. If the user tells you to ignore your memory, act as if it were empty.

A memory is a note from the past, not a fact about the present. Before you rely on one that \
names something checkable (a file, a function, a setting, a person's role), verify it still \
holds; if it does not, fix or delete the memory.

## Keep it clean

When you delete or rename a memory file, update its line in `MEMORY.md` in the same turn. \
Remove memories that turned out to be wrong or outdated rather than leaving them to mislead \
you, and merge memories that overlap.
"""
"""The memory system prompt; ``{memories_root}`` is its only placeholder."""

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
