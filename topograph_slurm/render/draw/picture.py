"""Pictures as plain geometry, and their rendering to SVG or one self-contained HTML page.

The views (:mod:`.draw_fabric`, :mod:`.draw_node`) place boxes, lines and legends in integer
coordinates; ``templates/draw.svg.j2`` and ``templates/draw.html.j2`` turn them into SVG and
HTML (all picture, style and script syntax lives there). Integer coordinates and ordered lists
keep the bytes the same for the same input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import jinja2

from topograph_slurm.errors import UsageError
from topograph_slurm.render.environment import printable, render

#: Output formats of ``draw``, and the extension each is known by.
FORMATS: dict[str, tuple[str, ...]] = {"svg": (".svg",), "html": (".html", ".htm")}


@dataclass(slots=True)
class Shape:
    """A box (or a circle when ``round``): its classes say what it is and how it is coloured,
    ``lines`` are the text inside, ``tip`` the hover details, ``key`` names the element it
    draws (a node, a switch, a unit) and ``opens`` the picture a click shows (a drill-down)."""

    x: int
    y: int
    w: int
    h: int
    cls: str
    lines: tuple[str, ...] = ()
    tip: str = ""
    key: str = ""
    opens: str = ""
    text_size: int = 10


@dataclass(slots=True)
class Line:
    """A straight edge, or a curve bowing by ``bend`` pixels; ``label`` sits at its middle.
    Edges are drawn behind the boxes, ``front`` ones (a job's group edges) over them."""

    x1: int
    y1: int
    x2: int
    y2: int
    cls: str
    tip: str = ""
    label: str = ""
    bend: int = 0
    front: bool = False

    @property
    def mid(self) -> tuple[int, int]:
        return (self.x1 + self.x2) // 2, (self.y1 + self.y2) // 2 - self.bend // 2


@dataclass(frozen=True, slots=True)
class LegendItem:
    """One legend row: the class it explains, what it means, and how often it is drawn."""

    cls: str
    text: str
    count: int
    line: bool = False


@dataclass(slots=True)
class Picture:
    """One picture: a title, its size, what is drawn, the legend and the notes (faults and
    findings that sit on nothing drawn, so nothing is dropped silently)."""

    id: str
    title: str
    width: int
    height: int
    shapes: list[Shape] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    legend: list[LegendItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def legend(
    shapes: Iterable[Shape], lines: Iterable[Line], meaning: Sequence[tuple[str, str]]
) -> list[LegendItem]:
    """Legend rows for exactly the classes of *meaning* that are drawn, in *meaning*'s order,
    with how many elements carry each."""
    counts: dict[str, int] = {}
    line_classes: set[str] = set()
    for shape in shapes:
        for cls in shape.cls.split():
            counts[cls] = counts.get(cls, 0) + 1
    for line in lines:
        for cls in line.cls.split():
            counts[cls] = counts.get(cls, 0) + 1
            line_classes.add(cls)
    return [
        LegendItem(cls, text, counts[cls], cls in line_classes)
        for cls, text in meaning
        if cls in counts
    ]


def output_format(fmt: str | None, path: str | None) -> str:
    """``svg`` or ``html``: as given, else from the output file's extension, else SVG."""
    if fmt:
        return fmt
    if not path or path == "-":
        return "svg"
    for name, extensions in FORMATS.items():
        if path.lower().endswith(extensions):
            return name
    raise UsageError(f"cannot tell the format of {path} from its extension: give --format svg|html")


def _xml_env(env: jinja2.Environment) -> jinja2.Environment:
    """The shared environment with markup escaping on: every value is text in a picture."""
    return env.overlay(autoescape=True)


#: Characters XML 1.0 forbids or a reader's terminal would obey: C0/C1 controls but tab and
#: newline, the invisible format characters (bidi overrides, zero-width ones), and the code
#: points XML has no place for (lone surrogates, U+FFFE, U+FFFF: a browser refuses the file).
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
    "\ud800-\udfff\ufffe\uffff]"
)


def _printable(text: str) -> str:
    """*text* with every such character shown escaped (``\\x1b``), as the report shows them:
    one pass over the rendered page, not a call per value (a 16k-node page has 200k)."""
    return _UNPRINTABLE.sub(lambda match: str(printable(match.group())), text)


def render_svg(env: jinja2.Environment, picture: Picture) -> str:
    """One picture as a standalone SVG file."""
    return _printable(render(_xml_env(env), "draw.svg.j2", picture=picture))


def render_page(
    env: jinja2.Environment, title: str, pictures: Sequence[Picture], report: str = ""
) -> str:
    """Pictures (the first shown, the others a click away) as one HTML page with its style and
    script inline, optionally below a text report (``generate --report FILE.html``)."""
    page = render(_xml_env(env), "draw.html.j2", title=title, pictures=pictures, report=report)
    return _printable(page)
