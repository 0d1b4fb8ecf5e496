"""Checks of a page at a phone's width, for the browser tests of the catalog and of the on-call
pages: nothing wider than the screen, and the content that matters on screen."""

from __future__ import annotations

# An iPhone 12-15's CSS viewport, the narrowest of the common current phones.
PHONE = {"width": 390, "height": 844}

# Every element outside the viewport's width that is not inside a scrolling box (a picture
# one scrolls sideways on purpose, like the lineage graph), and the document's own width.
_OVERFLOW = """() => {
  const width = window.innerWidth;
  const scrolled = (element) => {
    for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
      const overflow = getComputedStyle(up).overflowX;
      if (overflow === "auto" || overflow === "scroll") return true;
    }
    return false;
  };
  const outside = [];
  for (const element of document.body.querySelectorAll("*")) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if ((box.right > width + 0.5 || box.left < -0.5) && !scrolled(element)) {
      const name = element.tagName.toLowerCase() + "." + (element.getAttribute("class") || "");
      outside.push(`${name} ${Math.round(box.left)}..${Math.round(box.right)}`);
    }
  }
  const root = getComputedStyle(document.documentElement).overflowX;
  const body = getComputedStyle(document.body).overflowX;
  return {
    width, scrollWidth: document.documentElement.scrollWidth, outside: outside.slice(0, 8),
    hidden: root !== "visible" || body !== "visible",
  };
}"""


def assert_fits(page) -> None:
    """The page is no wider than the window (``scrollWidth <= innerWidth``), with no element
    sticking out of it (except inside a box scrolled sideways on purpose), and without
    hiding what overflows (``overflow-x`` on the document or body)."""
    found = page.evaluate(_OVERFLOW)
    where = page.url
    assert not found["hidden"], f"{where}: overflow hidden on the document"
    assert found["scrollWidth"] <= found["width"], f"{where}: {found}"
    assert found["outside"] == [], f"{where}: {found['outside']}"


def assert_on_screen(locator) -> None:
    """``locator``'s first element is visible and lies within the window's width (a phone
    user sees it without scrolling sideways)."""
    from playwright.sync_api import expect

    element = locator.first
    expect(element).to_be_visible()
    box = element.bounding_box()
    width = element.page.viewport_size["width"]
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, box
