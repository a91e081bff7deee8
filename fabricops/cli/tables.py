"""Listings that read well in any terminal, 80 columns included.

A listing is a title, columns and rows of plain text. Each column says how much
it matters (``keep``): when the rows do not fit the terminal, the columns that
matter least are hidden first and a caption names them (``--json`` always has
every field). Ids and times never wrap and are never cut short: a value too wide
for its column folds onto the next line, so it can still be copied whole. Free
text (notes, details) wraps within what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.markup import escape
from rich.table import Table

#: Never hidden.
ALWAYS = 9
_GAP = 3  # between two cells: padding on each side and the box's blank rule
_FREE_MIN = 16  # free text is not squeezed below this before columns are hidden


@dataclass(frozen=True)
class Col:
    """One column: its header, how much it matters (``ALWAYS`` is never hidden),
    right-justified (numbers) or not, free text (may wrap) or not."""

    header: str
    keep: int = 5
    right: bool = False
    free_text: bool = False

    def natural(self, cells: Sequence[str]) -> int:
        return max([len(self.header), *(len(c) for c in cells)])

    def least(self, cells: Sequence[str]) -> int:
        natural = self.natural(cells)
        return min(natural, _FREE_MIN) if self.free_text else natural


def listing(title: str, cols: Sequence[Col], rows: Sequence[Sequence[str]],
            width: int) -> Table:
    """A table of ``rows`` (plain text, escaped here) that fits ``width`` columns."""
    shown = list(range(len(cols)))
    cells = [[row[i] for row in rows] for i in range(len(cols))]

    def need(indices: list[int]) -> int:
        return sum(cols[i].least(cells[i]) for i in indices) + _GAP * (len(indices) - 1)

    while need(shown) > width:
        droppable = [i for i in shown if cols[i].keep < ALWAYS]
        if not droppable:
            break
        shown.remove(min(reversed(droppable), key=lambda i: cols[i].keep))
    hidden = [cols[i].header for i in range(len(cols)) if i not in shown]
    caption = f"not shown: {', '.join(hidden)} (--json has all)" if hidden else None
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                  min_width=min(width, max(len(title), len(caption or ""))))
    for i in shown:
        col = cols[i]
        table.add_column(col.header, justify="right" if col.right else "left",
                         no_wrap=not col.free_text, overflow="fold",
                         min_width=col.least(cells[i]))
    for row in rows:
        table.add_row(*(escape(row[i]) for i in shown))
    return table
