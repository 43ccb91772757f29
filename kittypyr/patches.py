"""How a patch pasted into a mail is recognised, for indexing and for display alike."""

# A line that opens a patch.
PATCH_START = ("diff ", "--- a/", "Index: ", "@@ ")

# Lines that belong to a patch without being part of a hunk's body: file
# headers (git, svn, plain diff -u), binary markers and "\ No newline".
PATCH_HEADERS = (
    "diff",
    "index ",
    "Index: ",
    "---",
    "+++",
    "===",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
    "Binary files ",
    "GIT binary patch",
    "\\",
)
