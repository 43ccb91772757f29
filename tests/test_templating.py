"""Templates compile one at a time, however many first requests come at once."""

import threading
import time

from chameleon import PageTemplateFile
from chameleon.template import BaseTemplate

from tests.test_app import make_app


def test_templates_of_an_app_compile_one_at_a_time(tmp_path, monkeypatch):
    make_app(tmp_path)
    compiling = []
    overlapped = []
    compile_template = BaseTemplate._compile

    def slow_compile(self, body, builtins):
        compiling.append(self.filename)
        if len(compiling) > 1:
            overlapped.append(list(compiling))
        time.sleep(0.05)  # lets another thread in, if it may
        try:
            return compile_template(self, body, builtins)
        finally:
            compiling.remove(self.filename)

    monkeypatch.setattr(BaseTemplate, "_compile", slow_compile)
    pages = []
    for number in range(4):
        path = tmp_path / f"page{number}.pt"
        path.write_text(f"<p>page {number}: ${{word}}</p>")
        pages.append(PageTemplateFile(str(path)))
    rendered = {}

    def render(page):
        rendered[page.filename] = page(word="first")

    threads = [threading.Thread(target=render, args=(page,)) for page in pages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlapped == []
    assert sorted(rendered.values()) == [f"<p>page {number}: first</p>" for number in range(4)]
