"""One piece of a `PretrainingCorpus`: the unit a pipeline worker reads, and the pool its NotNext
segments come from."""

import collections

CorpusSplit = collections.namedtuple("CorpusSplit", ["file_index", "path", "start", "end"])
CorpusSplit.__doc__ = """The documents of file `paths[file_index]` whose key position lies in
[start, end): for the text format, the byte offset of the blank line before the document (0 for a
file's first document), so a document belongs to exactly one split whatever the split size; a
reviews CSV is never split (a quoted field spans lines), its one split covers the whole file."""
