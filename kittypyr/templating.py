"""Templates are compiled one at a time.

Chameleon compiles a template into Python the first time a page needs it.
CPython 3.11's compiler keeps state that threads share: two threads
compiling at the same moment can fail with "SystemError: AST constructor
recursion depth mismatch", and two first requests for pages of different
kinds answered 500. Compiling is done once per template and process, so a
process-wide lock around it costs nothing afterwards. (``kittypyr.warm_up``
compiles the templates before the port opens, but a template that another
one loads for its layout is compiled with each first page that uses it.)
"""

import functools
import threading

from chameleon.template import BaseTemplate

_compiling = threading.RLock()


def _one_at_a_time(cook):
    @functools.wraps(cook)
    def cook_in_turn(self, *args, **kwargs):
        with _compiling:
            return cook(self, *args, **kwargs)

    cook_in_turn.one_at_a_time = True
    return cook_in_turn


def compile_one_at_a_time():
    """Make every Chameleon template of this process compile in turn (once, however often called)."""
    if not getattr(BaseTemplate._cook, "one_at_a_time", False):
        BaseTemplate._cook = _one_at_a_time(BaseTemplate._cook)


def includeme(config):
    compile_one_at_a_time()
