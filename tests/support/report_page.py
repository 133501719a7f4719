"""The report's page as a browser reads it (tags, attributes, text), and the hostile strings its tests store:
shared by tests/api/test_report.py and tests/api/test_report_sections.py."""

from __future__ import annotations

from html.parser import HTMLParser

#: every tag the page may hold (anything else, a <script> above all, is a bug)
ALLOWED_TAGS = {
    *("html", "head", "meta", "title", "body", "style", "header", "section", "div", "h1", "h2", "small"),
    *("span", "b", "p", "pre", "br", "table", "thead", "tbody", "tr", "th", "td", "details", "summary"),
}
HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "a & b &amp; c",
    "héllo ✓ 日本語 🧠",
    "'single' `tick`",
]
LONG = "x" * 50_000


class Page(HTMLParser):
    """The page as a browser would read it: its tags, their attributes, and its text."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def assert_inert(document: str) -> Page:
    """No script, no event handler, nothing loaded from anywhere; returns the parsed page."""
    assert "<script" not in document.lower()
    page = Page(document)
    assert {tag for tag, _ in page.tags} <= ALLOWED_TAGS
    attributes = {name for _, attrs in page.tags for name in attrs}
    assert attributes <= {"class", "style", "title", "lang", "charset", "name", "content", "open"}
    assert "url(" not in document and "http://" not in document and "https://" not in document
    return page


def section(document: str, title: str) -> str:
    """The text of one card of the page (``Files``, ``Transcript``, ``Commit log``, ``Audit trail``)."""
    start = document.index(f"<h2>{title} ")
    return Page(document[start : document.index("</section>", start)]).text
