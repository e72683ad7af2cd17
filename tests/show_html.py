"""`probe show`'s page read back as data: every token span of every pair, by its data attributes
(probes/report/show_page.py), with the pair and the text it sits in."""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser


@dataclass
class Span:
    pair: int
    side: str
    position: int
    classes: frozenset[str]
    delta: float | None
    nll: float | None
    other: float | None
    marks: frozenset[str]
    reach: str | None
    text: str = ""

    @property
    def shaded(self) -> bool:
        return "s" in self.classes


class PageSpans(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.spans: list[Span] = []
        self.pair: int | None = None
        self.side: str | None = None
        self.current: Span | None = None
        self.elided = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        if tag == "div" and "pair" in classes:
            self.pair = int(a["data-pair"])
        elif tag == "div" and "text" in classes:
            self.side = a["data-side"]
        elif tag == "span" and "gap" in classes:
            self.elided += int(a["data-elided"])
        elif tag == "span" and "t" in classes and "data-p" in a:

            def num(key):
                return float(a[key]) if key in a else None

            self.current = Span(
                self.pair, self.side, int(a["data-p"]), frozenset(classes), num("data-d"),
                num("data-nll"), num("data-o"), frozenset((a.get("data-m") or "").split()),
                a.get("data-r"),
            )  # fmt: skip
            self.spans.append(self.current)

    def handle_data(self, data):
        if self.current is not None:
            self.current.text += data

    def handle_endtag(self, tag):
        if tag == "span":
            self.current = None


def spans(html: str) -> list[Span]:
    p = PageSpans()
    p.feed(html)
    return p.spans
