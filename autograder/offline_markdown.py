"""Markdown that a browser shows with no network: math as MathML, no image from another server.

The solutions site, the class report and feedback pages are read offline (a student's laptop on a
train, an instructor's browser with a strict policy). nbconvert's pages load MathJax from a CDN to
draw ``$...$``; here the math is converted once, when the page is built, to MathML, which browsers
draw without a script. The Colab badge is an image on Colab's server, so it becomes a plain label.
"""

from __future__ import annotations

import html
import re

DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)([^$\n]+?)(?<!\\)\$(?!\$)")
CODE_SPAN = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
BADGE_LABEL = '<span class="colab">Open in Colab</span>'
# What MathML a formula may become: latex2mathml turns \\href{...} into an href attribute, so every formula
# passes an allow-list (nh3) of presentation elements and their layout attributes: no link, no script.
MATHML_TAGS = frozenset(
    {
        "math", "mi", "mn", "mo", "ms", "mtext", "mrow", "msub", "msup", "msubsup", "mfrac", "msqrt", "mroot", "mover",
        "munder", "munderover", "mtable", "mtr", "mtd", "mspace", "mstyle", "mpadded", "mphantom", "menclose",
    }
)  # fmt: skip
MATHML_ATTRIBUTES = frozenset(
    {
        "xmlns", "display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "columnalign", "width",
        "height", "depth", "accent", "accentunder", "linethickness", "displaystyle", "scriptlevel", "form", "largeop",
        "movablelimits", "symmetric", "minsize", "maxsize", "notation", "rowalign", "columnlines", "rowlines", "frame",
        "columnspacing", "rowspacing",
    }
)  # fmt: skip


def latex_to_mathml(markdown: str) -> str:
    """Replace ``$…$`` and ``$$…$$`` outside code with MathML that browsers draw without scripts."""
    import nh3
    from latex2mathml.converter import convert

    def render(latex: str, display: str) -> str:
        try:
            mathml = convert(latex.strip(), display=display)
        except Exception:  # noqa: BLE001 - show the source rather than lose the sentence
            return f"<code>{html.escape(latex)}</code>"
        return nh3.clean(mathml, tags=set(MATHML_TAGS), attributes={"*": set(MATHML_ATTRIBUTES)}, url_schemes=set())

    pieces = CODE_SPAN.split(markdown)
    for i in range(0, len(pieces), 2):  # even pieces are outside code spans
        text = DISPLAY_MATH.sub(lambda m: "\n\n" + render(m.group(1), "block") + "\n\n", pieces[i])
        pieces[i] = INLINE_MATH.sub(lambda m: render(m.group(1), "inline"), text)
    return "".join(pieces)


def offline_markdown(markdown: str) -> str:
    """``markdown`` with its math as MathML and the Colab badge image as a label."""
    from course_utils.colab import BADGE_IMAGE

    markdown = re.sub(rf'<img src="{re.escape(BADGE_IMAGE)}"[^>]*>', BADGE_LABEL, markdown)
    return latex_to_mathml(markdown)
