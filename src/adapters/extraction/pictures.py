"""What page images and pictures to read share: their PNG encoding, 8-bit pixels."""

from __future__ import annotations

import io

from PIL import Image, ImageChops

# zlib's fastest level: about half the encoding time of the default (6) for 15% more bytes,
# and encoding is most of the cost of a page image.
_PNG_COMPRESS_LEVEL = 1
WIDE_MODES = frozenset({"I", "F", "I;16", "I;16L", "I;16B", "I;16N"})
"""Pillow's modes of more than 8 bits a pixel, which its conversions to "L" or "RGB" clip."""


def eight_bit(picture: Image.Image) -> Image.Image:
    """A picture of a wide mode (16-bit grey from a scanner, say) as 8-bit grey, its darkest
    pixel black and its lightest white; any other picture as it is."""
    if picture.mode not in WIDE_MODES:
        return picture
    wide = picture.convert("I") if picture.mode.startswith("I;16") else picture
    # One band (the wide modes are grey): its two extremes are numbers.
    low, high = (float(v) for v in wide.getextrema())  # type: ignore[arg-type]
    scale = 255 / ((high - low) or 1)
    return wide.point(lambda value: value * scale - low * scale).convert("L")


def png_data(picture: Image.Image) -> bytes:
    """`picture` as a PNG, grey-scale when its colour channels are equal."""
    png = io.BytesIO()
    lean = without_redundant_channels(picture)
    lean.save(png, format="PNG", compress_level=_PNG_COMPRESS_LEVEL)
    if lean is not picture:
        lean.close()
    return png.getvalue()


def without_redundant_channels(picture: Image.Image) -> Image.Image:
    """A grey-scale copy of an RGB picture whose three channels are equal (a page without
    colour: the same pixels, a third of the data to compress), else the picture itself."""
    if picture.mode != "RGB":
        return picture
    red, green, blue = picture.split()
    if ImageChops.difference(red, green).getbbox() or ImageChops.difference(green, blue).getbbox():
        return picture
    return red
