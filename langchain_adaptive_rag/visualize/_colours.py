"""Colour maps of the token views, without matplotlib.

The views colour a signal with three ColorBrewer sequential schemes (``YlOrRd``, its
reverse ``YlOrRd_r``, and ``PuBu``). Here they are sampled as matplotlib samples its
colour maps of the same names (a 256-entry table of linear interpolations between the
scheme's nine colours, a value picks the entry ``int(value * 256)``), so the HTML views
need no matplotlib and colour a value exactly as the figures and their colour bars do.
"""

from __future__ import annotations

from functools import cache

import numpy as np

__all__ = ["COLORMAP_NAMES", "colormap_hex"]

_TABLE_SIZE = 256
"""Entries of a sampled colour map (matplotlib's ``image.lut`` default)."""

_SCHEMES: dict[str, tuple[tuple[float, float, float], ...]] = {
    "YlOrRd": (
        (1.0, 1.0, 0.8),
        (1.0, 0.92941176470588238, 0.62745098039215685),
        (0.99607843137254903, 0.85098039215686272, 0.46274509803921571),
        (0.99607843137254903, 0.69803921568627447, 0.29803921568627451),
        (0.99215686274509807, 0.55294117647058827, 0.23529411764705882),
        (0.9882352941176471, 0.30588235294117649, 0.16470588235294117),
        (0.8901960784313725, 0.10196078431372549, 0.10980392156862745),
        (0.74117647058823533, 0.0, 0.14901960784313725),
        (0.50196078431372548, 0.0, 0.14901960784313725),
    ),
    "PuBu": (
        (1.0, 0.96862745098039216, 0.98431372549019602),
        (0.92549019607843142, 0.90588235294117647, 0.94901960784313721),
        (0.81568627450980391, 0.81960784313725488, 0.90196078431372551),
        (0.65098039215686276, 0.74117647058823533, 0.85882352941176465),
        (0.45490196078431372, 0.66274509803921566, 0.81176470588235294),
        (0.21176470588235294, 0.56470588235294117, 0.75294117647058822),
        (0.0196078431372549, 0.4392156862745098, 0.69019607843137254),
        (0.01568627450980392, 0.35294117647058826, 0.55294117647058827),
        (0.00784313725490196, 0.2196078431372549, 0.34509803921568627),
    ),
}
"""The nine colours (RGB in ``[0, 1]``) of each ColorBrewer scheme, light to dark."""

COLORMAP_NAMES = (*_SCHEMES, *(f"{name}_r" for name in _SCHEMES))
"""Colour maps [`colormap_hex`][] knows (``_r``: reversed)."""


def _sample(stops: np.ndarray, values: np.ndarray) -> np.ndarray:
    """One channel's table: linear interpolation between ``(stop, value)`` points.

    Args:
        stops: Positions in ``[0, 1]``, increasing, from 0 to 1.
        values: The channel's value at each stop.

    Returns:
        ``_TABLE_SIZE`` values, at ``i / (_TABLE_SIZE - 1)``.
    """
    scaled = stops * (_TABLE_SIZE - 1)
    at = (_TABLE_SIZE - 1) * np.linspace(0, 1, _TABLE_SIZE)
    index = np.searchsorted(scaled, at)[1:-1]
    distance = (at[1:-1] - scaled[index - 1]) / (scaled[index] - scaled[index - 1])
    inner = distance * (values[index] - values[index - 1]) + values[index - 1]
    table: np.ndarray = np.clip(np.concatenate([[values[0]], inner, [values[-1]]]), 0.0, 1.0)
    return table


@cache
def _table(name: str) -> tuple[str, ...]:
    """The hex colour of every entry of the colour map ``name``."""
    reverse = name.endswith("_r")
    colours = np.asarray(_SCHEMES[name.removesuffix("_r")], dtype=np.float64)
    stops = np.linspace(0, 1, len(colours))
    if reverse:  # the stops mirrored (1 - x), as matplotlib reverses a colour map
        stops, colours = 1.0 - stops[::-1], colours[::-1]
    channels = [_sample(stops, colours[:, c]) for c in range(3)]
    return tuple(
        "#" + "".join(format(round(float(channel[i]) * 255), "02x") for channel in channels)
        for i in range(_TABLE_SIZE)
    )


def colormap_hex(name: str, fraction: float) -> str:
    """Hex colour of ``fraction`` on the colour map ``name``.

    Args:
        name: One of [`COLORMAP_NAMES`][].
        fraction: Position on the map; below 0 takes the first colour, above 1 the last.

    Returns:
        The colour as ``#rrggbb``.
    """
    table = _table(name)
    position = fraction * _TABLE_SIZE
    if position >= _TABLE_SIZE:  # 1.0 is the last entry, as above 1
        return table[-1]
    if position < 0:
        return table[0]
    return table[int(position)]
