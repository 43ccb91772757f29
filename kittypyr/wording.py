"""How counts are said on pages, in notes and on the command line."""


def counted(count, word, plural=None):
    """'1 message', '3 messages': a count with its noun in the right number (``plural`` when not ``word`` + s)."""
    return f"{count} {word}" if count == 1 else f"{count} {plural or word + 's'}"
